package ublk

import (
	"sync/atomic"
	"time"
)

// A queue's thread serves small requests itself (inline), which is the
// fastest way while the device answers from memory or the page cache. But
// while the thread waits on a stalled device, every other request of its
// queue waits behind it: with a backend that takes 45 s per request, two
// small requests on one queue took 90 s where dm-crypt takes 45. So a
// watchdog looks at every queue each stallTick: a request that has kept the
// queue thread busy for a whole tick, or workers of the queue that
// completed nothing in a tick while some were busy, mark the queue slow,
// and a slow queue hands every request to workers, which wait on the
// device side by side. The queue goes back to inline service once it has
// seen no stall for stallHold. (Requests already waiting behind the first
// stuck one still wait for it: the queue thread alone can take them.)
const (
	stallTick = 100 * time.Millisecond
	stallHold = 5 * time.Second
)

// stallWatch is a queue's part of the watchdog: counters the queue
// updates, and what the watchdog saw at its last look.
type stallWatch struct {
	inlineStarted, inlineDone atomic.Uint64
	workStarted, workDone     atomic.Uint64
	slow                      atomic.Bool

	// the watchdog's own
	seenInline, seenWorkDone uint64
	slowUntil                time.Time
}

// watchStalls watches queues until done is closed.
func watchStalls(queues []*queue, done <-chan struct{}, logf func(string, ...any)) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			for _, q := range queues {
				if q.stall.look(now) && logf != nil {
					logf("ublk: queue %d: a request waited on the device for over %v: serving requests on workers", q.id, stallTick)
				}
			}
		}
	}
}

// look updates the queue's state at one tick, and reports whether the
// queue just became slow.
func (w *stallWatch) look(now time.Time) bool {
	started, done := w.inlineStarted.Load(), w.inlineDone.Load()
	stuckInline := started != done && started == w.seenInline
	w.seenInline = started
	wStarted, wDone := w.workStarted.Load(), w.workDone.Load()
	stuckWorkers := wStarted != wDone && wDone == w.seenWorkDone
	w.seenWorkDone = wDone
	wasSlow := w.slow.Load()
	switch {
	case stuckInline || stuckWorkers:
		w.slowUntil = now.Add(stallHold)
		w.slow.Store(true)
		return !wasSlow
	case wasSlow && now.After(w.slowUntil):
		w.slow.Store(false)
	}
	return false
}
