package devtest

import (
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Erring passes every call to the device below, except that an operation
// whose error is set fails with exactly that error (and does nothing).
// Frontend tests use it to check that each backend error reaches the
// client or the kernel with the right meaning.
type Erring struct {
	blockdev.Device
	mu   sync.Mutex
	errs map[ErringOp]error
}

// NewErring wraps dev; it fails nothing until Fail says so.
func NewErring(dev blockdev.Device) *Erring {
	return &Erring{Device: dev, errs: map[ErringOp]error{}}
}

// ErringOp names an operation of Erring.
type ErringOp int

// The operations Erring can fail.
const (
	OpRead ErringOp = iota
	OpWrite
	OpFlush
	OpTrim
	OpWriteZeroes
)

// Fail makes op fail with err from now on; nil heals it.
func (e *Erring) Fail(op ErringOp, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs[op] = err
}

// FailAll makes every operation fail with err from now on; nil heals them.
func (e *Erring) FailAll(err error) {
	for _, op := range []ErringOp{OpRead, OpWrite, OpFlush, OpTrim, OpWriteZeroes} {
		e.Fail(op, err)
	}
}

// AsOpError wraps err as blockdev.File reports a failed request, so that a
// test sees an error mapping look through the wrapper.
func AsOpError(err error) error {
	return &blockdev.OpError{Op: "write", Path: "/dev/sdz", Off: 4096, Len: 512, Err: err}
}

func (e *Erring) failure(op ErringOp) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errs[op]
}

// ReadAt fails with the read error, else reads below.
func (e *Erring) ReadAt(p []byte, off int64) (int, error) {
	if err := e.failure(OpRead); err != nil {
		return 0, err
	}
	return e.Device.ReadAt(p, off)
}

// WriteAt fails with the write error, else writes below.
func (e *Erring) WriteAt(p []byte, off int64) (int, error) {
	if err := e.failure(OpWrite); err != nil {
		return 0, err
	}
	return e.Device.WriteAt(p, off)
}

// Flush fails with the flush error (every time), else flushes below.
func (e *Erring) Flush() error {
	if err := e.failure(OpFlush); err != nil {
		return err
	}
	return e.Device.Flush()
}

// Trim fails with the trim error; without one it trims below, or reports
// blockdev.ErrNotSupported when the device below cannot.
func (e *Erring) Trim(off, length int64) error {
	if err := e.failure(OpTrim); err != nil {
		return err
	}
	if t, ok := e.Device.(blockdev.Trimmer); ok {
		return t.Trim(off, length)
	}
	return blockdev.ErrNotSupported
}

// WriteZeroes fails with the write-zeroes error; without one it writes
// zeroes below (through WriteZeroes when the device has it).
func (e *Erring) WriteZeroes(off, length int64) error {
	if err := e.failure(OpWriteZeroes); err != nil {
		return err
	}
	if z, ok := e.Device.(blockdev.ZeroWriter); ok {
		return z.WriteZeroes(off, length)
	}
	_, err := e.Device.WriteAt(make([]byte, length), off)
	return err
}

// Hold passes every call to the device below, but while held, reads,
// writes and flushes (all of them, or those StallIf picks) wait until
// Release: a backend that stalls.
type Hold struct {
	blockdev.Device
	mu      sync.Mutex
	gate    chan struct{} // nil: not held
	match   func(op ErringOp, off int64) bool
	entered chan struct{}
}

// NewHold wraps dev, not held.
func NewHold(dev blockdev.Device) *Hold {
	return &Hold{Device: dev, entered: make(chan struct{}, 1024)}
}

// Stall makes calls from now on wait until Release.
func (h *Hold) Stall() { h.StallIf(nil) }

// StallIf makes the calls from now on for which match(op, off) is true
// wait until Release (OpRead, OpWrite or OpFlush, whose off is 0); a nil
// match holds them all.
func (h *Hold) StallIf(match func(op ErringOp, off int64) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
	h.match = match
}

// Release lets every waiting and later call through.
func (h *Hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

// Entered receives once for every call that started waiting.
func (h *Hold) Entered() <-chan struct{} { return h.entered }

func (h *Hold) wait(op ErringOp, off int64) {
	h.mu.Lock()
	g, match := h.gate, h.match
	h.mu.Unlock()
	if g == nil || match != nil && !match(op, off) {
		return
	}
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-g
}

// ReadAt waits while held, then reads below.
func (h *Hold) ReadAt(p []byte, off int64) (int, error) {
	h.wait(OpRead, off)
	return h.Device.ReadAt(p, off)
}

// WriteAt waits while held, then writes below.
func (h *Hold) WriteAt(p []byte, off int64) (int, error) {
	h.wait(OpWrite, off)
	return h.Device.WriteAt(p, off)
}

// Flush waits while held, then flushes below.
func (h *Hold) Flush() error {
	h.wait(OpFlush, 0)
	return h.Device.Flush()
}
