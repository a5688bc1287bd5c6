package devtest

import (
	"sync"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// Barrier holds every read and write until want of them wait at once, as
// a backend whose every request takes the same long time (dm-delay): a
// caller that runs the pieces of a request a few at a time never gets
// there. After guard the calls go through anyway and Reached says so.
type Barrier struct {
	blockdev.Device
	want    int
	guard   time.Duration
	mu      sync.Mutex
	waiting int
	open    chan struct{}
	gaveUp  bool
}

// NewBarrier wraps dev; calls wait until want of them wait, or for guard.
func NewBarrier(dev blockdev.Device, want int, guard time.Duration) *Barrier {
	return &Barrier{Device: dev, want: want, guard: guard, open: make(chan struct{})}
}

func (b *Barrier) wait() {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.want && !b.gaveUp {
		close(b.open)
	}
	open := b.open
	b.mu.Unlock()
	select {
	case <-open:
	case <-time.After(b.guard):
		b.mu.Lock()
		if !b.gaveUp && b.waiting < b.want {
			b.gaveUp = true
			close(b.open)
		}
		b.mu.Unlock()
	}
}

// ReadAt waits at the barrier, then reads below.
func (b *Barrier) ReadAt(p []byte, off int64) (int, error) {
	b.wait()
	return b.Device.ReadAt(p, off)
}

// WriteAt waits at the barrier, then writes below.
func (b *Barrier) WriteAt(p []byte, off int64) (int, error) {
	b.wait()
	return b.Device.WriteAt(p, off)
}

// Reached reports whether want calls waited together (the guard did not
// run out first).
func (b *Barrier) Reached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.gaveUp
}
