package devtest

import (
	"fmt"
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Panicking passes every call to the device below, except a read or write
// that touches an armed range (or a flush, when flushes are armed): that
// call panics, as a bug in a layer would, before touching the device. It
// shows what a frontend does with a panic in one request's handling.
type Panicking struct {
	blockdev.Device
	mu       sync.Mutex
	armed    [faultOps][]faultRange
	panicked int
}

// NewPanicking wraps dev with nothing armed.
func NewPanicking(dev blockdev.Device) *Panicking { return &Panicking{Device: dev} }

// PanicOn makes requests of kind op over [off, off+length) panic; a
// negative length reaches to the end. Flushes panic whatever the range.
func (p *Panicking) PanicOn(op FaultOp, off, length int64) {
	p.mu.Lock()
	p.armed[op] = append(p.armed[op], rangeOf(off, length))
	p.mu.Unlock()
}

// Panicked returns how many calls panicked.
func (p *Panicking) Panicked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.panicked
}

func (p *Panicking) check(op FaultOp, off, length int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.armed[op] {
		if op == FaultFlush || off < r.end && off+length > r.off {
			p.panicked++
			panic(fmt.Sprintf("devtest: injected panic in %s of %d bytes at %d", faultNames[op], length, off))
		}
	}
}

// ReadAt reads from the device below, or panics.
func (p *Panicking) ReadAt(b []byte, off int64) (int, error) {
	p.check(FaultRead, off, int64(len(b)))
	return p.Device.ReadAt(b, off)
}

// WriteAt writes to the device below, or panics.
func (p *Panicking) WriteAt(b []byte, off int64) (int, error) {
	p.check(FaultWrite, off, int64(len(b)))
	return p.Device.WriteAt(b, off)
}

// Flush flushes the device below, or panics.
func (p *Panicking) Flush() error {
	p.check(FaultFlush, 0, 0)
	return p.Device.Flush()
}
