package blockdev

import (
	"sync/atomic"
	"time"
)

// trimInterval is how long a free buffer may go unused before it is
// unmapped (nanoseconds; tests change it).
var trimInterval atomic.Int64

func init() { trimInterval.Store(int64(time.Second)) }

// trimming is set while the trimmer runs: from the first buffer kept free
// until the free lists are empty again, so an idle process has no timer.
var trimming atomic.Bool

// startTrimmer starts the trimmer unless it runs. Called with a stripe
// locked: the trimmer only starts here.
func startTrimmer() {
	if trimming.CompareAndSwap(false, true) {
		go trimLoop()
	}
}

func trimLoop() {
	for {
		time.Sleep(time.Duration(trimInterval.Load()))
		if trimIdle() > 0 {
			continue
		}
		trimming.Store(false)
		// A buffer kept since the last look restarts the loop here,
		// unless its PutBuffer started a new one.
		if freeBytes() == 0 || !trimming.CompareAndSwap(false, true) {
			return
		}
	}
}

// trimIdle unmaps, in every stripe, as many free bytes as the stripe kept
// free all along since the last trim (largest buffers first), and returns
// the bytes still kept free.
func trimIdle() int {
	left := 0
	for i := range buffers.stripes {
		s := &buffers.stripes[i]
		s.mu.Lock()
		target := s.bytes - s.low
		s.evictOthers(-1, target)
		s.low = s.bytes
		left += s.bytes
		s.mu.Unlock()
	}
	return left
}

// freeBytes returns the bytes kept free over all stripes.
func freeBytes() int {
	n := 0
	for i := range buffers.stripes {
		s := &buffers.stripes[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}
