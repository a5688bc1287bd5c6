package dmcrypt

import (
	"sync"
	"sync/atomic"
	"time"
)

// A request is split into chunks (chunkSize) that run on as many goroutines
// as there are idle cores: each reads or writes its piece of the backend and
// decrypts or encrypts it, so the cores bound the crypto. But a piece
// waiting on a stalled backend uses no core, and dm-crypt has all of a
// request's I/O in flight at once. Run on two cores, a 512 KiB read of a
// backend that answers every request after 45 s (dm-delay) took 180 s, four
// rounds of two pieces. So when a request is still unfinished after
// stallDelay, every piece not yet started gets a goroutine of its own: a
// slow backend then costs one delay per request, as under dm-crypt.
const (
	stallDelay = 50 * time.Millisecond
	// Goroutines added per stalled request, and over the device: each may
	// hold a thread blocked in the backend.
	maxRequestHelpers = 64
	maxDeviceHelpers  = 256
)

// parallel splits [off, off+length) at chunk boundaries aligned to the
// sector size and runs fn on each piece, on up to GOMAXPROCS goroutines
// shared with the other requests in progress: when the cores are busy with
// other requests already, the pieces run one after the other. It returns
// the first error; pieces already done stay done.
func (d *Device) parallel(off, length int64, fn func(cOff, cLen int64) error) error {
	active := int(d.active.Add(1))
	defer d.active.Add(-1)
	// Pieces start at multiples of chunkSize (a multiple of every sector
	// size), so only the first and last can hold a partial sector.
	firstChunk := off / chunkSize
	lastChunk := (off + length - 1) / chunkSize
	n := int(lastChunk - firstChunk + 1)
	piece := func(i int) (int64, int64) {
		s := max(off, (firstChunk+int64(i))*chunkSize)
		e := min(off+length, (firstChunk+int64(i)+1)*chunkSize)
		return s, e - s
	}
	if n == 1 {
		return fn(piece(0))
	}
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	work := func() {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := fn(piece(i)); err != nil {
				errOnce.Do(func() { firstErr = err })
				failed.Store(true)
				return
			}
		}
	}
	workers := max(1, min(n, d.procs-active+1))
	wg.Add(workers - 1)
	for range workers - 1 {
		go func() { defer wg.Done(); work() }()
	}
	// The timer holds a count of wg, so that its helpers are added while
	// the count is above zero.
	wg.Add(1)
	stall := time.AfterFunc(stallDelay, func() {
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
	if stall.Stop() {
		wg.Done()
	}
	wg.Wait()
	return firstErr
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
