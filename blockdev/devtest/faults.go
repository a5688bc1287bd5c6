package devtest

import (
	"sync"
	"syscall"

	"github.com/luksd/luksd/blockdev"
)

// FaultOp names the kind of request a fault hits.
type FaultOp int

const (
	FaultRead  FaultOp = iota // ReadAt
	FaultWrite                // WriteAt, Trim, WriteZeroes
	FaultFlush                // Flush
	faultOps
)

var faultNames = [faultOps]string{"read", "write", "flush"}

// Faulty passes every call to the device below, except requests hit by an
// armed fault, which fail with EIO (wrapped in a blockdev.OpError) and do
// nothing: the device-mapper "error" target over a range, or over all of it.
type Faulty struct {
	dev      blockdev.Device
	mu       sync.Mutex
	armed    [faultOps][]faultRange
	injected [faultOps]int
}

type faultRange struct{ off, end int64 }

var _ blockdev.Device = (*Faulty)(nil)

// NewFaulty puts a fault layer over dev, with no fault armed.
func NewFaulty(dev blockdev.Device) *Faulty { return &Faulty{dev: dev} }

// Fail makes requests of kind op that touch [off, off+length) fail; a
// negative length reaches to the end of the device. Flushes fail whatever
// the range.
func (f *Faulty) Fail(op FaultOp, off, length int64) {
	f.mu.Lock()
	f.armed[op] = append(f.armed[op], rangeOf(off, length))
	f.mu.Unlock()
}

// rangeOf is [off, off+length), to the end of any device when length is
// negative.
func rangeOf(off, length int64) faultRange {
	if length < 0 {
		return faultRange{off, 1<<63 - 1}
	}
	return faultRange{off, off + length}
}

// FailAll makes every read, write and flush fail.
func (f *Faulty) FailAll() {
	for op := range faultOps {
		f.Fail(op, 0, -1)
	}
}

// Heal disarms every fault.
func (f *Faulty) Heal() {
	f.mu.Lock()
	f.armed = [faultOps][]faultRange{}
	f.mu.Unlock()
}

// Injected returns how many requests of kind op failed by a fault.
func (f *Faulty) Injected(op FaultOp) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected[op]
}

// hit returns the error for a request of kind op over [off, off+length),
// or nil when no fault touches it.
func (f *Faulty) hit(op FaultOp, off, length int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.armed[op] {
		if op == FaultFlush || off < r.end && off+length > r.off {
			f.injected[op]++
			return &blockdev.OpError{Op: faultNames[op], Path: "faulty", Off: off, Len: length, Err: syscall.EIO}
		}
	}
	return nil
}

// ReadAt reads from the device below unless a read fault hits.
func (f *Faulty) ReadAt(p []byte, off int64) (int, error) {
	if err := f.hit(FaultRead, off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.dev.ReadAt(p, off)
}

// WriteAt writes to the device below unless a write fault hits.
func (f *Faulty) WriteAt(p []byte, off int64) (int, error) {
	if err := f.hit(FaultWrite, off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.dev.WriteAt(p, off)
}

// Trim passes a discard down unless a write fault hits.
func (f *Faulty) Trim(off, length int64) error {
	if err := f.hit(FaultWrite, off, length); err != nil {
		return err
	}
	t, ok := f.dev.(blockdev.Trimmer)
	if !ok {
		return blockdev.ErrNotSupported
	}
	return t.Trim(off, length)
}

// WriteZeroes zeroes the range below unless a write fault hits.
func (f *Faulty) WriteZeroes(off, length int64) error {
	if err := f.hit(FaultWrite, off, length); err != nil {
		return err
	}
	if z, ok := f.dev.(blockdev.ZeroWriter); ok {
		return z.WriteZeroes(off, length)
	}
	_, err := f.dev.WriteAt(make([]byte, length), off)
	return err
}

// Flush flushes the device below unless a flush fault is armed.
func (f *Faulty) Flush() error {
	if err := f.hit(FaultFlush, 0, 0); err != nil {
		return err
	}
	return f.dev.Flush()
}

// Size is the size of the device below.
func (f *Faulty) Size() int64 { return f.dev.Size() }

// Close closes the device below.
func (f *Faulty) Close() error { return f.dev.Close() }

// WriteBack is a write-back cache over a device, with the failure mode of
// the kernel's page cache over a file: a write is acknowledged once it is
// in memory; Flush writes the dirty data below and flushes the device.
// When writing back fails, the data is no longer dirty but stays readable
// (reads show what the device does not hold), and the error is reported
// to that one Flush only: the next one succeeds. This is why luksd cannot
// rely on fdatasync alone after buffered writes; tests put
// blockdev.Tracked over it to show the loss is still reported.
type WriteBack struct {
	dev    blockdev.Device
	mu     sync.Mutex
	cached []Op // every write still in memory, oldest first
	dirty  int  // cached[len(cached)-dirty:] are not written back yet
}

var _ blockdev.Device = (*WriteBack)(nil)

// NewWriteBack puts a write-back cache over dev.
func NewWriteBack(dev blockdev.Device) *WriteBack { return &WriteBack{dev: dev} }

// ReadAt reads from the device below with the cached writes on top.
func (w *WriteBack) ReadAt(p []byte, off int64) (int, error) {
	n, err := w.dev.ReadAt(p, off)
	if err != nil {
		return n, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, op := range w.cached {
		overlay(p, off, op)
	}
	return n, nil
}

// overlay copies the part of op's data that falls in [off, off+len(p)).
func overlay(p []byte, off int64, op Op) {
	lo, hi := max(off, op.Off), min(off+int64(len(p)), op.Off+int64(len(op.Data)))
	if lo < hi {
		copy(p[lo-off:hi-off], op.Data[lo-op.Off:hi-op.Off])
	}
}

// WriteAt keeps the write in memory and acknowledges it.
func (w *WriteBack) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > w.dev.Size() {
		return 0, blockdev.ErrOutOfRange
	}
	w.mu.Lock()
	w.cached = append(w.cached, Op{Off: off, Data: append([]byte(nil), p...)})
	w.dirty++
	w.mu.Unlock()
	return len(p), nil
}

// Flush writes the dirty data back, then flushes the device below. A
// write-back error is returned once; the data it concerned stays cached
// but is no longer dirty.
func (w *WriteBack) Flush() error {
	w.mu.Lock()
	dirty := w.cached[len(w.cached)-w.dirty:]
	w.dirty = 0
	w.mu.Unlock()
	var first error
	for _, op := range dirty {
		if _, err := w.dev.WriteAt(op.Data, op.Off); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return w.dev.Flush()
}

// DropCaches forgets the written-back data (echo 1 > drop_caches): reads
// show the device again.
func (w *WriteBack) DropCaches() {
	w.mu.Lock()
	w.cached = append([]Op(nil), w.cached[len(w.cached)-w.dirty:]...)
	w.mu.Unlock()
}

// Size is the size of the device below.
func (w *WriteBack) Size() int64 { return w.dev.Size() }

// Close closes the device below, dropping what was not flushed.
func (w *WriteBack) Close() error { return w.dev.Close() }
