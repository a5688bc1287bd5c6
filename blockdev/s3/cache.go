package s3

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The cache holds chunks in memory, whole: those read lately (an LRU of
// clean chunks, dropped when the cache is full) and those written since
// their last upload (dirty: never dropped; their number is bounded, and a
// write that would dirty one more waits until an upload makes room).
// Chunks a sequential stream has read through (readahead.go: every
// byte of them, whatever the order its reads came in) are kept apart
// and dropped first, all but the last passedChunks of them even when
// the cache is not full: a long sequential read does not push out
// what other readers use, and it goes on in the memory of the chunks it
// has passed (chunkmem.go's spares), where fresh memory would cost a page
// fault per page.
//
// Locking: c.mu guards the map, the LRU, the counts and every entry's
// state fields; an entry's own mu guards its data and is held across the
// store request that loads it, and by a writer from its reservation to
// its write, so that an upload ending meanwhile (which takes it too)
// cannot mark the entry clean under the write. An entry's mu is taken
// before c.mu, never after.
type cache struct {
	chunkSize int64
	maxBytes  int64 // cached bytes, dirty included
	maxDirty  int   // dirty chunks
	chunkLen  func(idx int64) int64

	mu          sync.Mutex
	changed     *sync.Cond // signalled when an upload ends
	entries     map[int64]*entry
	dirtySet    map[int64]*entry
	lru         list.List // unreferenced clean entries, the oldest at the back
	passed      list.List // the same, read through by a stream (entry.passed)
	bytes       int64     // len(data) of every entry
	loading     int64     // bytes admitted for loads under way (cache_room.go)
	dirty       int       // entries with dirty set
	seq         uint64    // the generation of the latest write
	waiting     int       // writers waiting for room
	flushes     int       // flushes waiting for uploads
	active      int       // uploads running
	roomWaiters int       // loads waiting for room
	lastErr     error     // of the last failed upload
}

// entry is one chunk in the cache.
type entry struct {
	idx int64

	mu     sync.Mutex
	data   []byte // the whole chunk, or nil: see loaded, zero and have
	loaded bool   // data (or zero) is what the chunk holds
	zero   bool   // loaded, and all zeros (data is nil)
	// have, while data is set and not loaded, lists the bytes of data
	// that writes have filled (partial.go); the rest is not known until
	// a load merges what the store holds under them.
	have extents

	// Guarded by cache.mu.
	refs   int
	elem   *list.Element // in lru or passed while unreferenced and clean
	passed bool          // a stream read it through; no read or write since
	// streamed lists the bytes a stream has read since the chunk was
	// cached or last read by another reader: the chunk is passed once
	// they cover it. Concurrent requests complete out of order, so the
	// read that reaches the chunk's end may come before the others;
	// dropping the chunk then made them load it again.
	streamed  extents
	dirty     bool   // counted in cache.dirty until uploaded
	partial   bool   // data is set and not loaded (have): its upload loads it first
	written   uint64 // generation of the last write
	uploaded  uint64 // generation of the last write in the store
	uploading bool
	lastWrite time.Time
	failures  int // failed uploads, in a row
	err       error
	retryAt   time.Time
}

func newCache(chunkSize, maxBytes int64, maxDirty int, chunkLen func(int64) int64) *cache {
	c := &cache{chunkSize: chunkSize, maxBytes: maxBytes, maxDirty: maxDirty, chunkLen: chunkLen,
		entries: map[int64]*entry{}, dirtySet: map[int64]*entry{}}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// get returns the entry of chunk idx, referenced: it stays in the cache
// until release.
func (c *cache) get(idx int64) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[idx]
	if e == nil {
		e = &entry{idx: idx}
		c.entries[idx] = e
	}
	if e.elem != nil {
		c.unlist(e)
	}
	e.refs++
	return e
}

// release drops get's reference, and the oldest clean chunks while the
// cache is over its bounds.
func (c *cache) release(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	c.settle(e)
	c.evict()
	c.roomChanged()
}

// releaseRead is release after a read of bytes [lo, hi) of e: reads by
// a stream that have covered all of its n bytes mark it passed, any
// other read unmarks it.
func (c *cache) releaseRead(e *entry, stream bool, lo, hi, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stream {
		e.streamed = e.streamed.add(lo, hi)
		if e.streamed.covers(0, n) {
			e.passed, e.streamed = true, nil
		}
	} else {
		e.passed, e.streamed = false, nil
	}
	e.refs--
	c.settle(e)
	c.evict()
	c.roomChanged()
}

// passedChunks is how many chunks a stream has read through stay cached.
const passedChunks = 4

// settle puts an unreferenced clean entry at the front of the LRU, or of
// the passed chunks. c.mu is held.
func (c *cache) settle(e *entry) {
	if e.refs == 0 && !e.dirty && !e.uploading && e.elem == nil {
		if e.passed {
			e.elem = c.passed.PushFront(e)
		} else {
			e.elem = c.lru.PushFront(e)
		}
	}
}

// unlist takes e out of the list it is in. c.mu is held.
func (c *cache) unlist(e *entry) {
	if e.passed {
		c.passed.Remove(e.elem)
	} else {
		c.lru.Remove(e.elem)
	}
	e.elem = nil
}

// evict drops the chunks passed but the last passedChunks, then the
// passed and the least recently used clean chunks while more bytes are
// cached (or being loaded) than allowed, or more entries than a cache
// that size would need (not-stored chunks hold no bytes but an entry
// each). c.mu is held.
func (c *cache) evict() { c.evictTo(c.maxBytes) }

// evictTo is evict down to limit bytes. The spare chunks kept for reuse
// are then cut to the room left, so that they too stay within the
// cache's bound. c.mu is held.
func (c *cache) evictTo(limit int64) {
	maxEntries := int(c.maxBytes/c.chunkSize)*4 + 1024
	defer func() { trimSpares(c.maxBytes - c.bytes - c.loading) }()
	for {
		var last *list.Element
		switch {
		case c.passed.Len() > passedChunks:
			last = c.passed.Back()
		case c.bytes+c.loading <= limit && len(c.entries) <= maxEntries:
			return
		case c.passed.Len() > 0:
			last = c.passed.Back()
		case c.lru.Len() > 0:
			last = c.lru.Back()
		default:
			return
		}
		c.dropListed(last.Value.(*entry))
	}
}

// dropListed drops e, an entry of the LRU or of the passed chunks. c.mu
// is held.
func (c *cache) dropListed(e *entry) {
	c.unlist(e)
	delete(c.entries, e.idx)
	c.bytes -= int64(len(e.data))
	freeChunk(e.data)
	e.data = nil
}

// forget drops every chunk that is clean and that no request holds:
// what the cache read from the store, not what it has still to upload.
func (c *cache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range []*list.List{&c.passed, &c.lru} {
		for l.Len() > 0 {
			c.dropListed(l.Back().Value.(*entry))
		}
	}
}

// has reports whether chunk idx is in the cache (or being loaded).
func (c *cache) has(idx int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[idx] != nil
}

// drop frees the data of every chunk no request holds, when the volume
// closes (the uploads have stopped).
func (c *cache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for idx, e := range c.entries {
		if e.refs == 0 {
			c.bytes -= int64(len(e.data))
			freeChunk(e.data)
			e.data = nil
			delete(c.entries, idx)
		}
	}
}

// reserve makes e dirty before a write changes it, waiting while the
// dirty chunks are at their bound. kick wakes the uploads. A wait longer
// than timeout fails (the store has not taken an upload for that long):
// a store that stays down turns into errors, not a hang.
func (c *cache) reserve(e *entry, kick func(), timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := func() bool {
		if e.dirty || c.dirty < c.maxDirty {
			return true
		}
		kick()
		return false
	}
	if !c.waitUntil(room, &c.waiting, timeout) {
		return fmt.Errorf("%w: no upload succeeded for %v: %v", ErrCacheFull, timeout, c.lastErr)
	}
	c.markDirty(e)
	return nil
}

// waitUntil waits on changed until ok (called with c.mu held) reports
// true, counting itself in *waiters meanwhile; false after timeout.
func (c *cache) waitUntil(ok func() bool, waiters *int, timeout time.Duration) bool {
	if ok() {
		return true
	}
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer wake.Stop()
	*waiters++
	defer func() { *waiters-- }()
	for !ok() {
		if !time.Now().Before(deadline) {
			return false
		}
		c.changed.Wait()
	}
	return true
}

// ErrCacheFull: a write waited for room among the dirty chunks longer
// than the store's timeout.
var ErrCacheFull = errors.New("the write-back cache is full")

// markDirty counts e dirty. c.mu is held. A chunk made dirty is due
// WriteDelay from now, not from a write before its last upload: the
// scheduler may look before the reserved write (wrote) is done.
func (c *cache) markDirty(e *entry) {
	if !e.dirty {
		e.lastWrite = time.Now()
		e.dirty = true
		c.dirty++
		c.dirtySet[e.idx] = e
	}
}

// wrote records a write of e (its data changed) and returns its
// generation. e.mu is held. A write that has filled a chunk partly
// written (partial.go) makes its upload due at once, and the chunk one
// passed once uploaded (dropped first, as a stream reader's): a
// sequential writer has gone past it.
func (c *cache) wrote(e *entry) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e.written = c.seq
	filled := e.partial && e.loaded
	e.passed = filled
	e.partial = e.data != nil && !e.loaded
	e.lastWrite = time.Now()
	if filled {
		e.lastWrite = time.Time{}
	}
	return e.written
}

// setData sets e's data (from allocChunk, or nil) as loaded, accounting
// for its bytes and freeing the data it replaces. e.mu is held.
func (c *cache) setData(e *entry, data []byte, zero bool) {
	c.setBytes(e, data, true)
	e.zero = zero
}

// setBytes sets e's data (from allocChunk, or nil), loaded or not (then
// writes fill it: have), accounting for its bytes and freeing the data it
// replaces. e.mu is held.
func (c *cache) setBytes(e *entry, data []byte, loaded bool) {
	c.mu.Lock()
	c.bytes += int64(len(data) - len(e.data))
	e.partial = data != nil && !loaded
	c.mu.Unlock()
	freeChunk(e.data)
	e.data, e.zero, e.loaded, e.have = data, false, loaded, nil
}
