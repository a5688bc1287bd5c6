package s3

import (
	"fmt"
	"time"
)

// Room for loads. A read of a chunk not cached loads the whole chunk, so
// random reads in flight would each hold one: 32 of 4 KiB, with 4 MiB
// chunks, 128 MiB beside a cache bounded at 32 MiB (measured: a 32 MiB
// cache peaked at 250 MiB resident under fio's 4 KiB randread at depth
// 32). So a load first counts its chunk among the cache's bytes (admit),
// evicting clean chunks to make room, and waits while the chunks cached,
// dirty or being loaded leave none: requests that hold chunks release
// them, and uploads make dirty chunks clean. Writes are bounded by the
// dirty chunks instead (reserve); a write never waits here, as it holds a
// reservation an upload may need.

// admit counts n bytes for a chunk about to be loaded once they fit,
// waiting up to timeout for room (then ErrCacheFull: the store has not
// taken an upload, or answered a load, for that long).
func (c *cache) admit(n int64, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.waitUntil(func() bool { return c.fits(n) }, &c.roomWaiters, timeout) {
		return fmt.Errorf("%w: no room to load a chunk for %v: %v", ErrCacheFull, timeout, c.lastErr)
	}
	c.loading += n
	return nil
}

// tryAdmit is admit without waiting, for read-ahead: false when there is
// no room now.
func (c *cache) tryAdmit(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fits(n) {
		return false
	}
	c.loading += n
	return true
}

// admitted gives back admit's n bytes once the load has ended (its data,
// if any, is counted in bytes by then).
func (c *cache) admitted(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading -= n
	c.roomChanged()
}

// fits evicts what it may to make room for n bytes more and reports
// whether they fit. c.mu is held.
func (c *cache) fits(n int64) bool {
	c.evictTo(c.maxBytes - n)
	return c.bytes+c.loading+n <= c.maxBytes
}

// roomChanged wakes the loads waiting for room. c.mu is held.
func (c *cache) roomChanged() {
	if c.roomWaiters > 0 {
		c.changed.Broadcast()
	}
}
