package s3

// Read-ahead. A reader going forward through the volume (a copy, a file
// read through NBD) would otherwise start each chunk's GET only when it
// gets there, however many GETs the store could serve at once. So the
// volume follows one stream of reads: once the reads have gone from one
// chunk into another, each read near the stream's last chunk (within
// Uploads chunks either way: concurrent requests arrive out of order)
// moves the stream on and opens a window of readAheadChunks chunks past
// it. Up to Uploads loads keep the window's chunks that are not cached
// coming, each load starting the next as it ends, so the store has that
// many GETs to serve as long as the reader keeps up, and none once it
// stops: a read anywhere else starts a new stream with no window, and
// the chunks still waiting in the old one are not loaded (a load under
// way ends and stays cached). Loads never pass the volume's end, and
// Close cancels those under way.
//
// A load fills the chunk's cache entry under the entry's lock, as a
// reader's miss does: a write waits for a load under way, and a chunk
// written before its load started is cached (dirty) already, so a load
// never puts older bytes over newer ones. The window is at most a
// quarter of the cache, so loads do not push out the chunks the reader
// has yet to reach. Their errors are dropped: the reader that needs the
// chunk tries again itself.

import "sync"

// readAhead is the stream the read-ahead follows.
type readAhead struct {
	mu      sync.Mutex
	started bool  // a read has started the stream
	first   int64 // the stream's first chunk
	last    int64 // its last chunk read so far
	next    int64 // the next chunk of the window to load
	end     int64 // the window's last chunk (next > end: none to load)
	running int   // loads running
	stopped bool  // the volume is closing: no load starts
}

// readAheadChunks is how many chunks past a sequential reader are
// loaded: twice as many as load at once, so that a load that ends finds
// another chunk to start; at most a quarter of what the cache holds.
func (v *Volume) readAheadChunks() int64 {
	return min(2*int64(v.opts.Uploads), v.opts.CacheBytes/v.m.ChunkSize/4)
}

// followStream notes a read of chunks first to last: it moves the stream
// and its window on, or starts a new stream, and starts loads for the
// window. It reports whether the read is part of a sequential stream.
func (v *Volume) followStream(first, last int64) bool {
	n := v.readAheadChunks()
	if n == 0 {
		return false
	}
	near := int64(v.opts.Uploads)
	ra := &v.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if !ra.started || first < ra.last-near || first > ra.last+near {
		ra.started = true
		ra.first, ra.last, ra.next, ra.end = first, last, last+1, last
	} else {
		ra.last = max(ra.last, last)
	}
	if ra.last == ra.first {
		return false // not yet out of the chunk it started in
	}
	ra.end = min(ra.last+n, (v.m.Size-1)/v.m.ChunkSize)
	ra.next = max(ra.next, ra.last+1)
	for ra.running < v.opts.Uploads && ra.next+int64(ra.running) <= ra.end && !ra.stopped {
		ra.running++
		v.wg.Add(1)
		go v.readAheadLoads()
	}
	return true
}

// stopReadAhead ends the read-ahead when the volume closes: no load
// starts after it (those under way are counted in v.wg).
func (v *Volume) stopReadAhead() {
	v.ra.mu.Lock()
	defer v.ra.mu.Unlock()
	v.ra.stopped = true
}

// readAheadLoads loads the window's chunks until none is left to load.
func (v *Volume) readAheadLoads() {
	defer v.wg.Done()
	for {
		idx, ok := v.nextReadAhead()
		if !ok {
			return
		}
		v.prefetch(idx)
	}
}

// nextReadAhead takes the window's next chunk to load; false when there
// is none (or the volume is closing), and then the load ends.
func (v *Volume) nextReadAhead() (int64, bool) {
	ra := &v.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.next > ra.end || ra.stopped {
		ra.running--
		return 0, false
	}
	ra.next++
	return ra.next - 1, true
}

// prefetch loads chunk idx into the cache unless it is there already or
// someone holds it (a reader or writer, which loads it if need be).
func (v *Volume) prefetch(idx int64) {
	if v.c.has(idx) {
		return
	}
	e := v.c.get(idx)
	defer v.c.release(e)
	if !e.mu.TryLock() {
		return
	}
	defer e.mu.Unlock()
	if e.loaded || e.data != nil {
		return // loaded meanwhile, or being written
	}
	// No waiting for room: a read-ahead that finds none is skipped.
	n := v.chunkLen(idx)
	if !v.c.tryAdmit(n) {
		return
	}
	if v.hooks.prefetch != nil {
		v.hooks.prefetch(idx)
	}
	v.loadAdmitted(v.prefetchStore, e, n)
}
