package s3

import (
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// Dirty chunks are uploaded in the background, several at once: a chunk
// once no write has touched it for writeDelay (so that a run of writes
// into one chunk costs one upload), and at once while a flush or a
// writer waits for one. A failed upload is retried after a backoff with
// jitter; the flushes waiting for it fail meanwhile (the chunk stays
// dirty, and a later flush succeeds once the store is back).

// scheduleUploads starts the uploads that are due until the volume
// closes.
func (v *Volume) scheduleUploads() {
	defer v.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		v.c.mu.Lock()
		wait := v.startDue(time.Now())
		v.c.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-v.kick:
		case <-timer.C:
		case <-v.done:
			return
		}
	}
}

// kickUploads wakes the scheduler.
func (v *Volume) kickUploads() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// startDue starts uploads of the dirty chunks that are due, as many as
// may run, and returns how long until the next one is. c.mu is held.
func (v *Volume) startDue(now time.Time) time.Duration {
	c := v.c
	next := time.Hour
	// The chunks writes have filled (or loaded) first, then those still
	// being filled (partial.go): a writer waiting for room hurries these
	// only when no upload runs to make it, as their upload reads the
	// chunk and is done again once the writes have filled it.
	for _, partial := range []bool{false, true} {
		urgent := c.flushes > 0 || c.waiting > 0 && (!partial || c.active == 0 && c.dirty >= c.maxDirty)
		for _, e := range c.dirtySet {
			if e.uploading || e.partial != partial {
				continue
			}
			due := e.lastWrite.Add(v.opts.WriteDelay)
			if urgent || due.Before(e.retryAt) {
				due = e.retryAt
			}
			if wait := due.Sub(now); wait > 0 {
				next = min(next, wait)
				continue
			}
			if c.active >= v.opts.Uploads {
				return next
			}
			e.uploading = true
			c.active++
			v.wg.Add(1)
			go v.upload(e)
		}
	}
	return next
}

// upload writes a snapshot of e's data to the store (deletes it when it is
// all zeros) and records the outcome. A chunk partly written is loaded
// first, under the bytes written (partial.go).
func (v *Volume) upload(e *entry) {
	defer v.wg.Done()
	st, err := v.writableStore()
	e.mu.Lock()
	v.c.mu.Lock()
	gen := e.written
	changed := gen > e.uploaded
	v.c.mu.Unlock()
	if err == nil && changed {
		err = v.loadFrom(st, e)
	}
	var snap []byte
	if err == nil && changed && !e.zero {
		snap = takeSnapshot(len(e.data))
		copy(snap, e.data)
	}
	e.mu.Unlock()
	defer putSnapshot(snap)

	switch {
	case err != nil:
		// Another opener may be writing the volume now (writableStore),
		// or the chunk could not be read (loadFrom).
	case !changed:
		// Made dirty by a write that then failed: nothing to upload.
	case snap == nil || blockdev.IsZero(snap):
		err = st.delete(chunkName(e.idx))
	default:
		err = st.put(chunkName(e.idx), snap, false)
	}
	if err != nil && v.checkLease() != nil {
		err = ErrLeaseLost // the reason it stopped trying
	}
	if v.hooks.stored != nil {
		v.hooks.stored(e.idx)
	}
	v.uploaded(e, gen, err)
	v.kickUploads()
}

// The copies of the chunks being uploaded are mapped outside the Go heap
// and kept for the next uploads, never unmapped: the SDK may still read a
// request's body after the call has returned (it is then a request that
// failed, its connection closed), so a mapping freed then could fault.
// Up to snapshotBytes are mapped (as many as uploads run at once by
// default, of 4 MiB chunks); more, for other uploads counts or chunk
// sizes, are on the heap. On the heap, the copies counted twice: the
// collector lets the heap grow to twice what is live, and a fresh 4 MiB
// for each upload cost its page faults and a collection every few
// uploads.
const snapshotBytes = DefaultUploads * DefaultChunkSize

var snapshots struct {
	sync.Mutex
	free   [][]byte      // mapped, not in use
	mapped int           // bytes mapped, in use or free
	isMap  map[*byte]int // the mapped ones, by their first byte
}

// takeSnapshot returns n bytes for a copy of a chunk to upload.
func takeSnapshot(n int) []byte {
	snapshots.Lock()
	defer snapshots.Unlock()
	for i, b := range snapshots.free {
		if len(b) == n {
			snapshots.free = append(snapshots.free[:i], snapshots.free[i+1:]...)
			return b
		}
	}
	if snapshots.mapped+n > snapshotBytes {
		return make([]byte, n)
	}
	b := mapChunk(n)
	if snapshots.isMap == nil {
		snapshots.isMap = map[*byte]int{}
	}
	snapshots.isMap[&b[0]] = n
	snapshots.mapped += n
	return b
}

// putSnapshot gives back a buffer from takeSnapshot (nil is ignored).
func putSnapshot(b []byte) {
	if len(b) == 0 {
		return
	}
	snapshots.Lock()
	defer snapshots.Unlock()
	if snapshots.isMap[&b[0]] == len(b) {
		snapshots.free = append(snapshots.free, b)
	}
}

// writableStore is the store for a write of the volume's chunks: with a
// lease, its retries end when the lease may lapse (a write past it could
// land over another holder's).
func (v *Volume) writableStore() (*Store, error) {
	if v.lease == nil {
		return v.st, nil
	}
	if err := v.lease.check(); err != nil {
		return nil, err
	}
	return v.st.until(v.lease.until()), nil
}

// uploaded records the end of an upload of e's generation gen. It takes
// e.mu first: a writer holds it from its reservation to its write's
// generation (writeChunk), so e is never marked clean between the two,
// which would leave that write out of every later flush.
func (v *Volume) uploaded(e *entry, gen uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	e.uploading = false
	c.active--
	defer c.changed.Broadcast()
	if err != nil {
		e.failures++
		e.err, c.lastErr = err, err
		backoff := min(10*time.Second, 100*time.Millisecond<<min(e.failures, 7))
		e.retryAt = time.Now().Add(backoff/2 + rand.N(backoff/2))
		return
	}
	e.failures, e.err = 0, nil
	e.uploaded = max(e.uploaded, gen)
	if e.written == e.uploaded {
		e.dirty = false
		c.dirty--
		delete(c.dirtySet, e.idx)
		c.settle(e)
		c.evict()
	}
}

// waitUploaded waits until each entry of need holds in the store at least
// the generation need gives it. It fails with the error of an upload of
// one of them that fails meanwhile.
func (v *Volume) waitUploaded(need map[*entry]uint64) error {
	c := v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes++
	defer func() { c.flushes-- }()
	failures := map[*entry]int{}
	for e := range need {
		failures[e] = e.failures
	}
	v.kickUploads()
	for len(need) > 0 {
		for e, gen := range need {
			switch {
			case e.uploaded >= gen:
				delete(need, e)
			case e.failures > failures[e]:
				return e.err
			}
		}
		if len(need) > 0 {
			if v.stopped {
				return os.ErrClosed
			}
			c.changed.Wait()
		}
	}
	return nil
}

// pending returns the entries of chunks first to last (all with
// all) that hold writes not in the store, with their latest generation.
func (v *Volume) pending(first, last int64, all bool) map[*entry]uint64 {
	c := v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	need := map[*entry]uint64{}
	for idx, e := range c.dirtySet {
		if (all || first <= idx && idx <= last) && e.written > e.uploaded {
			need[e] = e.written
		}
	}
	return need
}
