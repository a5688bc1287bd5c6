package nbd

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/testtool"
)

// The client's side of contrib/bench/nbd_client.sh, which runs fio's nbd
// engine (libnbd) against the same server for the ratios. The server is
// LUKSD_NBD_BENCH_URI, or an nbdkit file export started here.

const benchDepth = 32 // requests in flight, as fio's iodepth

func benchURI(b *testing.B) string {
	if uri := os.Getenv("LUKSD_NBD_BENCH_URI"); uri != "" {
		return uri
	}
	img := filepath.Join(b.TempDir(), "bench.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil || os.Truncate(img, 256<<20) != nil {
		b.Fatal("cannot make the image")
	}
	sock := filepath.Join(b.TempDir(), "bench.sock")
	testtool.StartPeerServer(b, "unix", sock, "nbdkit", "-f", "-U", sock, "file", img)
	return "nbd+unix:///?socket=" + sock
}

// benchClient issues b.N requests of bs bytes, benchDepth at a time:
// sequential (wrapping at the end) or at random aligned offsets.
func benchClient(b *testing.B, bs int, write, random bool) {
	c, err := Dial(benchURI(b), ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	blocks := c.Size() / int64(bs)
	b.SetBytes(int64(bs))
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for range benchDepth {
		wg.Go(func() {
			buf := blockdev.GetBuffer(bs)
			defer blockdev.PutBuffer(buf)
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				off := i % blocks * int64(bs)
				if random {
					off = rand.Int64N(blocks) * int64(bs)
				}
				var err error
				if write {
					_, err = c.WriteAt(buf, off)
				} else {
					_, err = c.ReadAt(buf, off)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkClientSeqRead1M(b *testing.B)  { benchClient(b, 1<<20, false, false) }
func BenchmarkClientSeqWrite1M(b *testing.B) { benchClient(b, 1<<20, true, false) }
func BenchmarkClientRandRead4K(b *testing.B) { benchClient(b, 4096, false, true) }
