package nbd

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// scratchDev is an in-memory device with WriteAtScratch that records the
// payloads it was handed and then scribbles over them, as the crypt
// layer's in-place encryption does.
type scratchDev struct {
	*devtest.Mem
	mu   sync.Mutex
	got  [][]byte
	plan []int64 // offsets written through WriteAtScratch
}

func (d *scratchDev) WriteAtScratch(p []byte, off int64) (int, error) {
	n, err := d.Mem.WriteAt(p, off)
	d.mu.Lock()
	d.got = append(d.got, bytes.Clone(p))
	d.plan = append(d.plan, off)
	d.mu.Unlock()
	for i := range p {
		p[i] ^= 0xff
	}
	return n, err
}

// TestServerWritesPayloadInPlace: the server hands a WRITE's payload
// buffer to a device's WriteAtScratch (no copy in the crypt layer), and
// what lands on the device is the payload.
func TestServerWritesPayloadInPlace(t *testing.T) {
	dev := &scratchDev{Mem: devtest.NewMem(1 << 20)}
	srv := NewServer(dev, Config{})
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	l, err := ListenUnix(sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })

	c := dialGo(t, sock, "")
	payload := bytes.Repeat([]byte("in place"), 512)
	for i, off := range []uint64{0, 8192, 65536} {
		if _, err := c.c.Write(append(requestBytes(cmdWrite, 0, uint64(i), off, uint32(len(payload))), payload...)); err != nil {
			t.Fatal(err)
		}
		if code, cookie := c.simpleReply(t); code != 0 || cookie != uint64(i) {
			t.Fatalf("write %d: error %d cookie %d", i, code, cookie)
		}
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if len(dev.got) != 3 {
		t.Fatalf("WriteAtScratch called %d times for 3 writes", len(dev.got))
	}
	for i, off := range []int64{0, 8192, 65536} {
		if dev.plan[i] != off || !bytes.Equal(dev.got[i], payload) {
			t.Fatalf("write %d: WriteAtScratch at %d with a different payload", i, dev.plan[i])
		}
		if !bytes.Equal(dev.Bytes()[off:off+int64(len(payload))], payload) {
			t.Fatalf("write %d: device holds something else", i)
		}
	}
}
