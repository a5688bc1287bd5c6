package ublk

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// With Options.RequestTimeout set, a request the device has not carried
// out in that time is completed with EIO, and the device stays. ublk_drv
// itself never times a request of a live daemon out (its timeout handler
// re-arms the timer unless the daemon is dying). The device operation
// cannot be cancelled: it goes on in its worker and its result is dropped;
// a write that timed out may so still reach the disk later.
//
// Once the kernel has the EIO, it may hand the tag to the next request, so
// a request that timed out must no longer move data through its tag: the
// handler works on a buffer of its own, and copies to and from the tag (or
// preads and pwrites it, with user copy) only under a lock that the
// timeout takes too. Requests that may time out are all served on workers:
// a request on the queue thread would hold back the timeout's commit.

// errTimedOut is what a timed-out request's late data copy returns.
var errTimedOut = errors.New("ublk: the request timed out")

// timedPayload wraps a request's payload when requests time out.
type timedPayload struct {
	inner  payload
	tagBuf []byte // copy mode: the tag's buffer; nil with user copy

	mu       sync.Mutex
	expired  bool // the timeout completed the request
	finished bool // the worker completed it
}

func (p *timedPayload) buffer(n int) []byte {
	if p.tagBuf != nil {
		return blockdev.GetBuffer(n)
	}
	return p.inner.buffer(n)
}

func (p *timedPayload) release(b []byte) {
	if p.tagBuf != nil {
		blockdev.PutBuffer(b)
		return
	}
	p.inner.release(b)
}

func (p *timedPayload) load(buf []byte) error  { return p.move(buf, false) }
func (p *timedPayload) store(buf []byte) error { return p.move(buf, true) }

// move copies buf into the request (store) or the request into buf (load),
// through the tag's own buffer once the timeout has given it one.
func (p *timedPayload) move(buf []byte, store bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.expired:
		return errTimedOut
	case p.tagBuf == nil && store:
		return p.inner.store(buf)
	case p.tagBuf == nil:
		return p.inner.load(buf)
	case store:
		copy(p.tagBuf, buf)
	default:
		copy(buf, p.tagBuf)
	}
	return nil
}

// expire claims the request for the timeout; finish claims it for the
// worker. Exactly one of them succeeds.
func (p *timedPayload) expire() bool { return p.claim(&p.expired) }
func (p *timedPayload) finish() bool { return p.claim(&p.finished) }
func (p *timedPayload) claim(b *bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expired || p.finished {
		return false
	}
	*b = true
	return true
}

// serveTimed serves a request that times out after q.timeout.
func (q *queue) serveTimed(tag int, d ioDesc) {
	p := &timedPayload{inner: q.payload(tag)}
	if !q.userCopy {
		p.tagBuf = q.bufs[tag]
	}
	t := time.AfterFunc(q.timeout, func() {
		if p.expire() {
			q.h.timedOut(d, q.timeout)
			q.finish(tag, -int32(syscall.EIO))
		}
	})
	res := q.h.serve(d, p)
	t.Stop()
	if p.finish() {
		q.finish(tag, res)
	}
}

// timedOut logs a request that timed out, rate-limited with the failures.
func (h *handler) timedOut(d ioDesc, after time.Duration) {
	if h.logf == nil {
		return
	}
	if d.opFlags&0xff == opFlush { // as a failed flush: see failed
		k := h.failures.Add(1)
		h.durability.Printf("ublk: flush not done after %v: completed with EIO (%d failures so far), acknowledged writes may not be durable", after, k)
		return
	}
	if k := h.failures.Add(1); k <= 10 || k%1000 == 0 {
		h.logf("ublk: %s of %d bytes at %d not done after %v: completed with EIO (%d failures so far)",
			opNames[d.opFlags&0xff], int64(d.nrSectors)<<9, int64(d.startSector)<<9, after, k)
	}
}
