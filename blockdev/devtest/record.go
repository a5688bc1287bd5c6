package devtest

import (
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Op is one recorded write or flush.
type Op struct {
	Flush bool   // a Flush; Off and Data are unset
	Off   int64  // a write's offset
	Data  []byte // a write's bytes (a copy)
}

// Recorder passes every call to the device below and records the writes
// and flushes that succeeded, in order. Crash-point tests use it with
// Persisted: a power cut after write N keeps writes 1..N and loses the rest.
type Recorder struct {
	blockdev.Device
	mu  sync.Mutex
	ops []Op
}

// NewRecorder records what reaches dev.
func NewRecorder(dev blockdev.Device) *Recorder { return &Recorder{Device: dev} }

// WriteAt writes through and records the write.
func (r *Recorder) WriteAt(p []byte, off int64) (int, error) {
	n, err := r.Device.WriteAt(p, off)
	if err == nil {
		r.mu.Lock()
		r.ops = append(r.ops, Op{Off: off, Data: append([]byte(nil), p...)})
		r.mu.Unlock()
	}
	return n, err
}

// Flush flushes through and records the flush.
func (r *Recorder) Flush() error {
	err := r.Device.Flush()
	if err == nil {
		r.mu.Lock()
		r.ops = append(r.ops, Op{Flush: true})
		r.mu.Unlock()
	}
	return err
}

// Ops returns the recorded operations.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Writes returns how many writes were recorded.
func (r *Recorder) Writes() int {
	n := 0
	for _, op := range r.Ops() {
		if !op.Flush {
			n++
		}
	}
	return n
}

// Persisted returns before with the first n recorded writes applied: the
// device as a power cut right after write n leaves it when every write
// reached the medium in order.
func (r *Recorder) Persisted(before []byte, n int) []byte {
	img := append([]byte(nil), before...)
	for _, op := range r.Ops() {
		if n == 0 {
			break
		}
		if op.Flush {
			continue
		}
		copy(img[op.Off:], op.Data)
		n--
	}
	return img
}

// Durable returns before with the writes that a flush made durable by the
// time write n completed: a power cut right after write n that loses every
// write not followed by a flush. Together with Persisted it brackets what
// a crash may leave when the device keeps the order of writes.
func (r *Recorder) Durable(before []byte, n int) []byte {
	img := append([]byte(nil), before...)
	var pending []Op
	for _, op := range r.Ops() {
		if n == 0 {
			break
		}
		if op.Flush {
			for _, w := range pending {
				copy(img[w.Off:], w.Data)
			}
			pending = pending[:0]
			continue
		}
		pending = append(pending, op)
		n--
	}
	return img
}
