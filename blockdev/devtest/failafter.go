package devtest

import (
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// FailAfter passes every call to the device below until a write budget,
// counted in writes or in bytes, runs out. The write that does not fit
// fails with the armed error and writes nothing, and so does every write
// after it, as a device that died (or a power cut) at that point: each
// write reaches the device whole or not at all. Reads and flushes pass.
type FailAfter struct {
	blockdev.Device
	mu      sync.Mutex
	err     error // nil: not armed
	bytes   bool  // the budget counts bytes, not writes
	left    int64
	refused int
}

// NewFailAfter wraps dev with no budget armed.
func NewFailAfter(dev blockdev.Device) *FailAfter { return &FailAfter{Device: dev} }

// Writes lets n more writes through, then fails every write with err.
func (f *FailAfter) Writes(n int, err error) { f.arm(false, int64(n), err) }

// Bytes lets writes through until they would pass n more bytes, then
// fails every write with err.
func (f *FailAfter) Bytes(n int64, err error) { f.arm(true, n, err) }

// Heal disarms the budget: every write goes through again.
func (f *FailAfter) Heal() { f.arm(false, 0, nil) }

// Refused returns how many writes failed.
func (f *FailAfter) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

func (f *FailAfter) arm(bytes bool, n int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bytes, f.left, f.err = bytes, n, err
}

// WriteAt writes below while the budget lasts.
func (f *FailAfter) WriteAt(p []byte, off int64) (int, error) {
	if err := f.take(int64(len(p))); err != nil {
		return 0, err
	}
	return f.Device.WriteAt(p, off)
}

// take spends one write of n bytes from the budget, or returns the error
// once it is spent (and from then on).
func (f *FailAfter) take(n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return nil
	}
	cost := int64(1)
	if f.bytes {
		cost = n
	}
	if cost > f.left {
		f.left = -1 // nothing fits any more, however small
		f.refused++
		return f.err
	}
	f.left -= cost
	return nil
}
