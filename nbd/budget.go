package nbd

import "sync"

// Payload bytes in flight are bounded twice: per connection
// (Config.MaxInFlightBytes) and over all connections
// (Config.MaxTotalInFlightBytes). A request holds its bytes from the moment
// its header is read until its reply is written, so a connection whose
// requests are stuck — a client that never reads its replies, a stalled
// backend — keeps its bytes and, once its own budget is full, is no longer
// read from. That alone does not protect the others: eight such
// connections hold the default 8 x 64 MiB, the whole server-wide budget,
// and a ninth client's 4 KiB read waits until the write timeout drops one
// of them. So the server-wide budget keeps a reserve of one largest
// request that only a connection with nothing in flight may take: stuck
// connections stop at their own budget or at the reserve, whichever comes
// first, and a new or idle client always gets its request served.

// semaphore is a counting semaphore over bytes.
type semaphore struct {
	mu    sync.Mutex
	cond  *sync.Cond
	avail int64
	limit int64
}

func newSemaphore(n int64) *semaphore {
	s := &semaphore{avail: n, limit: n}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// acquire takes n (capped at the limit, so one oversized request can
// always run alone). With keep set, it also leaves keep() bytes free,
// asking again whenever bytes are released.
func (s *semaphore) acquire(n int64, keep func() int64) {
	n = min(n, s.limit)
	s.mu.Lock()
	for s.avail < n || (keep != nil && s.avail-n < keep()) {
		s.cond.Wait()
	}
	s.avail -= n
	s.mu.Unlock()
}

func (s *semaphore) release(n int64) {
	n = min(n, s.limit)
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
	s.cond.Broadcast()
}
