package dmcrypt

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A request goes to the backend in as few calls as it can: one ReadAt or
// WriteAt per span of up to maxSpan bytes, so a backend that pays a round
// trip per call (nbd://, s3://) pays one per request. The crypto then
// runs on the span's buffer in chunks (chunkSize) on as many goroutines as
// there are idle cores.
//
// A request larger than maxSpan is several spans, which run on idle cores
// too. A span waiting on a stalled backend uses no core, and dm-crypt has
// all of a request's I/O in flight at once: run on two cores, a request of
// eight pieces over a backend that answers every call after 45 s
// (dm-delay) took four delays. So when a request is still unfinished
// after stallDelay, every span not yet started gets a goroutine of its
// own: a slow backend then costs one delay per request, as under dm-crypt.
const (
	// maxSpan bounds one backend call, and so the buffer a span holds:
	// a 32 MiB NBD request is eight spans. Span buffers come from
	// blockdev.GetBuffer (locked in memory, as they hold plaintext for a
	// moment; aligned for the backend's direct I/O), which keeps buffers
	// of this size for reuse. A multiple of chunkSize.
	maxSpan = 4 << 20
	// chunkSize is the unit of crypto one goroutine takes at a time.
	chunkSize = 64 << 10

	stallDelay = 50 * time.Millisecond
	// Goroutines added per stalled request, and over the device: each may
	// hold a thread blocked in the backend.
	maxRequestHelpers = 64
	maxDeviceHelpers  = 256
)

// spans splits [off, off+length) at multiples of d.span (a multiple of
// every sector size, so only the first and last span can hold a partial
// sector) and runs fn on each span. It returns the first error; spans
// already done stay done.
func (d *Device) spans(off, length int64, fn func(sOff, sLen int64) error) error {
	d.active.Add(1)
	defer d.active.Add(-1)
	span := d.span
	first := off / span
	n := int((off+length-1)/span - first + 1)
	return d.each(n, true, func(i int) error {
		s := max(off, (first+int64(i))*span)
		e := min(off+length, (first+int64(i)+1)*span)
		return fn(s, e-s)
	})
}

// crypt encrypts (or decrypts) buf, whole sectors of which the first is
// at plaintext offset off, in chunks on the idle cores. Before a chunk is
// encrypted, fill (when not nil) puts the plaintext into it: fill(chunk,
// at) is called with the chunk and its plaintext offset.
func (d *Device) crypt(buf []byte, off int64, encrypt bool, fill func(chunk []byte, at int64)) {
	if len(buf) <= chunkSize { // most requests: no closure to make
		d.cryptChunk(buf, off, encrypt, fill)
		return
	}
	n := (len(buf) + chunkSize - 1) / chunkSize
	_ = d.each(n, false, func(i int) error {
		c := buf[i*chunkSize : min(len(buf), (i+1)*chunkSize)]
		d.cryptChunk(c, off+int64(i*chunkSize), encrypt, fill)
		return nil
	})
}

// cryptChunk is crypt on one goroutine.
func (d *Device) cryptChunk(c []byte, at int64, encrypt bool, fill func(chunk []byte, at int64)) {
	if fill != nil {
		fill(c, at)
	}
	if encrypt {
		d.cipher.Encrypt(c, d.ivSector(at), int(d.sectorSize))
	} else {
		d.cipher.Decrypt(c, d.ivSector(at), int(d.sectorSize))
	}
}

// each runs fn(0) ... fn(n-1) on up to GOMAXPROCS goroutines shared with
// the other requests in progress (the caller's own included): when the
// cores are busy with other requests already, the pieces run one after
// the other. With stall (pieces that wait on the backend), pieces not
// started after stallDelay get helpers of their own. It returns the
// first error and starts no piece after it.
//
// A piece that panics, on whichever goroutine, stops the others from
// starting, and once every piece in progress is done, each panics on the
// caller's goroutine (HelperPanic): the frontends recover a panic in a
// request there and fail that request with EIO, where a panic on a
// helper goroutine would end the daemon, and no helper still touches the
// request's buffers when the caller unwinds.
func (d *Device) each(n int, stall bool, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
		panicked atomic.Pointer[HelperPanic]
	)
	work := func() {
		defer func() {
			if v := recover(); v != nil {
				panicked.CompareAndSwap(nil, &HelperPanic{Value: v})
				failed.Store(true)
			}
		}()
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := fn(i); err != nil {
				errOnce.Do(func() { firstErr = err })
				failed.Store(true)
				return
			}
		}
	}
	workers := max(1, min(n, d.procs-int(d.active.Load())+1))
	wg.Add(workers - 1)
	for range workers - 1 {
		go func() { defer wg.Done(); work() }()
	}
	if !stall {
		work()
		wg.Wait()
		repanic(panicked.Load())
		return firstErr
	}
	// The timer holds a count of wg, so that its helpers are added while
	// the count is above zero.
	wg.Add(1)
	timer := time.AfterFunc(stallDelay, func() {
		defer wg.Done()
		for range d.reserveHelpers(n - int(next.Load())) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer d.helpers.Add(-1)
				work()
			}()
		}
	})
	work()
	if timer.Stop() {
		wg.Done()
	}
	wg.Wait()
	repanic(panicked.Load())
	return firstErr
}

// HelperPanic is the value each panics with on the caller's goroutine
// when a piece of a request panicked.
type HelperPanic struct{ Value any }

func (p *HelperPanic) String() string { return fmt.Sprintf("%v (in a piece of the request)", p.Value) }

// repanic panics with p unless it is nil.
func repanic(p *HelperPanic) {
	if p != nil {
		panic(p)
	}
}

// reserveHelpers takes up to want helper goroutines from the device's
// allowance and returns how many it got.
func (d *Device) reserveHelpers(want int) int {
	want = min(want, maxRequestHelpers)
	for want > 0 {
		cur := d.helpers.Load()
		k := min(int32(want), maxDeviceHelpers-cur)
		if k <= 0 {
			return 0
		}
		if d.helpers.CompareAndSwap(cur, cur+k) {
			return int(k)
		}
	}
	return 0
}
