package devtest

import (
	"sync/atomic"

	"github.com/luksd/luksd/blockdev"
)

// FUA gives the device below a WriteAtFUA (a write and a flush) and counts
// the calls, so frontend tests can see that a write flagged FUA took the
// device's own durable write rather than a whole-device flush.
type FUA struct {
	blockdev.Device
	fuaWrites atomic.Int64
}

var _ blockdev.FUAWriter = (*FUA)(nil)

// NewFUA wraps dev.
func NewFUA(dev blockdev.Device) *FUA { return &FUA{Device: dev} }

// WriteAtFUA writes through and flushes below.
func (f *FUA) WriteAtFUA(p []byte, off int64) (int, error) {
	f.fuaWrites.Add(1)
	n, err := f.Device.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	return n, f.Device.Flush()
}

// FUAWrites returns how many times WriteAtFUA was called.
func (f *FUA) FUAWrites() int64 { return f.fuaWrites.Load() }
