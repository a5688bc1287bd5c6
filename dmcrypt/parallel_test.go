package dmcrypt

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// barrierDev holds every read and write until want of them are waiting at
// once, as a backend does whose every request takes the same long time
// (dm-delay): a request whose pieces run a few at a time never gets there.
// After a guard time the calls go through anyway and the test fails.
type barrierDev struct {
	blockdev.Device
	want int

	mu      sync.Mutex
	waiting int
	open    chan struct{}
	gaveUp  bool
}

const barrierGuard = 20 * time.Second

func (b *barrierDev) wait() {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.want && !b.gaveUp {
		close(b.open)
	}
	open := b.open
	b.mu.Unlock()
	select {
	case <-open:
	case <-time.After(barrierGuard):
		b.mu.Lock()
		if !b.gaveUp && b.waiting < b.want {
			b.gaveUp = true
			close(b.open)
		}
		b.mu.Unlock()
	}
}

func (b *barrierDev) ReadAt(p []byte, off int64) (int, error) {
	b.wait()
	return b.Device.ReadAt(p, off)
}

func (b *barrierDev) WriteAt(p []byte, off int64) (int, error) {
	b.wait()
	return b.Device.WriteAt(p, off)
}

func (b *barrierDev) reached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.gaveUp
}

// TestStalledBackendGetsAllPiecesAtOnce: a 512 KiB request is eight pieces;
// on two cores they used to run two at a time, so a backend that answers
// each request after a delay cost four delays. All eight must be in flight
// together.
func TestStalledBackendGetsAllPiecesAtOnce(t *testing.T) {
	const size = 512 << 10
	for _, op := range []string{"read", "write"} {
		t.Run(op, func(t *testing.T) {
			d, m, _ := newTestDevice(t, 4<<20, DeviceOptions{SectorSize: 4096})
			want := bytes.Repeat([]byte("stall"), size/5+1)[:size]
			if _, err := d.WriteAt(want, 0); err != nil {
				t.Fatal(err)
			}
			b := &barrierDev{Device: m, want: size / chunkSize, open: make(chan struct{})}
			d.backend = b
			d.procs = 2
			got := make([]byte, size)
			var err error
			if op == "read" {
				_, err = d.ReadAt(got, 0)
			} else {
				_, err = d.WriteAt(want, 0)
				d.backend = m
				if err == nil {
					_, err = d.ReadAt(got, 0)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if !b.reached() {
				t.Fatalf("the %d pieces of a %d KiB %s were never in flight together", size/chunkSize, size>>10, op)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("data differs")
			}
			if n := d.helpers.Load(); n != 0 {
				t.Fatalf("%d helper goroutines still counted", n)
			}
		})
	}
}
