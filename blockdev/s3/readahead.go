package s3

// A reader going forward would see one GET at a time, whatever the
// store's parallel throughput: a read that misses chunk idx, or enters it
// at its start, while chunk idx-1 is cached (the previous read ended
// there) loads the next chunks not cached in the background, so that the
// read-ahead count of them (Uploads, and at most a quarter of what the
// cache holds, so they do not push each other out) is always under way
// or done. Their errors are dropped: the reader that needs the chunk
// tries again itself.

// readAheadChunks is how many chunks a sequential reader gets ahead.
func (v *Volume) readAheadChunks() int {
	return min(v.opts.Uploads, int(v.opts.CacheBytes/v.m.ChunkSize/4))
}

// readAhead starts loads of the chunks after idx that are not cached.
func (v *Volume) readAhead(idx int64) {
	n := v.readAheadChunks()
	if n == 0 || !v.c.has(idx-1) {
		return
	}
	last := min(idx+int64(n), (v.m.Size-1)/v.m.ChunkSize)
	for next := idx + 1; next <= last; next++ {
		if v.c.has(next) {
			continue
		}
		select {
		case v.loads <- struct{}{}:
		default:
			return // as many as allowed under way
		}
		if v.closed.Load() {
			<-v.loads
			return
		}
		v.wg.Add(1)
		go v.prefetch(next)
	}
}

// prefetch loads chunk idx into the cache unless someone holds it.
func (v *Volume) prefetch(idx int64) {
	defer v.wg.Done()
	defer func() { <-v.loads }()
	e := v.c.get(idx)
	defer v.c.release(e)
	if !e.mu.TryLock() {
		return // a reader or writer has it: it loads it if need be
	}
	defer e.mu.Unlock()
	v.load(e)
}
