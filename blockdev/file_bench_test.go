package blockdev

import (
	"math/rand/v2"
	"os"
	"testing"
)

// BenchmarkFile compares direct and buffered I/O on an image file in
// $LUKSD_BENCH_DIR (default: the test's temporary folder), the decision
// File documents. Buffered writes only reach the page cache, so the
// write benchmarks flush every 64 MiB (sequential) or every 64 writes
// (random), as a file system above does; random reads are over a file
// over all of it.
func BenchmarkFile(b *testing.B) {
	const size = 256 << 20
	dir := os.Getenv("LUKSD_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	f, err := os.CreateTemp(dir, "bench-*.img")
	if err != nil {
		b.Fatal(err)
	}
	path := f.Name()
	defer os.Remove(path)
	fill := GetBuffer(1 << 20)
	defer PutBuffer(fill)
	for i := range fill {
		fill[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(fill)) {
		f.WriteAt(fill, off)
	}
	f.Close()

	for _, mode := range []struct {
		name     string
		buffered bool
	}{{"direct", false}, {"buffered", true}} {
		d, err := openFile(path, OpenOptions{Buffered: mode.buffered})
		if err != nil {
			b.Fatal(err)
		}
		if !mode.buffered && !d.Direct() {
			b.Skipf("no O_DIRECT on %s", dir)
		}
		r := rand.New(rand.NewPCG(1, 2))
		b.Run(mode.name+"/seqwrite-1M", func(b *testing.B) {
			b.SetBytes(1 << 20)
			for i := range b.N {
				if _, err := d.WriteAt(fill, int64(i%256)<<20); err != nil {
					b.Fatal(err)
				}
				if i%64 == 63 {
					d.Flush()
				}
			}
			d.Flush()
		})
		b.Run(mode.name+"/randwrite-4K", func(b *testing.B) {
			b.SetBytes(4096)
			for i := range b.N {
				if _, err := d.WriteAt(fill[:4096], int64(r.IntN(size/4096))*4096); err != nil {
					b.Fatal(err)
				}
				if i%64 == 63 {
					d.Flush()
				}
			}
			d.Flush()
		})
		b.Run(mode.name+"/seqread-1M", func(b *testing.B) {
			b.SetBytes(1 << 20)
			for i := range b.N {
				if _, err := d.ReadAt(fill, int64(i%256)<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/randread-4K", func(b *testing.B) {
			b.SetBytes(4096)
			for range b.N {
				if _, err := d.ReadAt(fill[:4096], int64(r.IntN(size/4096))*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
		d.Close()
	}
}
