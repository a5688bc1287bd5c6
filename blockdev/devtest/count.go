package devtest

import (
	"sync/atomic"

	"github.com/luksd/luksd/blockdev"
)

// Counter counts the reads and writes that reach the device below, so a
// test can see how many backend calls a layer above makes per request
// (each one a round trip on a remote backend).
type Counter struct {
	blockdev.Device
	reads, writes atomic.Int64
}

// NewCounter wraps dev.
func NewCounter(dev blockdev.Device) *Counter { return &Counter{Device: dev} }

// ReadAt counts the call and reads below.
func (c *Counter) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.Device.ReadAt(p, off)
}

// WriteAt counts the call and writes below.
func (c *Counter) WriteAt(p []byte, off int64) (int, error) {
	c.writes.Add(1)
	return c.Device.WriteAt(p, off)
}

// Calls returns the reads and writes counted since the last Reset.
func (c *Counter) Calls() (reads, writes int64) { return c.reads.Load(), c.writes.Load() }

// Reset sets both counts to zero.
func (c *Counter) Reset() {
	c.reads.Store(0)
	c.writes.Store(0)
}
