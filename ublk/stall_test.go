package ublk

import (
	"testing"
	"time"
)

// TestStallWatch: a request that keeps the queue thread for a whole tick,
// or busy workers that complete nothing in a tick, make the queue slow;
// it is fast again after stallHold without a stall.
func TestStallWatch(t *testing.T) {
	var w stallWatch
	now := time.Unix(1000, 0)
	tick := func() bool { now = now.Add(stallTick); return w.look(now) }

	w.inlineStarted.Add(1) // a request on the queue thread
	if tick() || w.slow.Load() {
		t.Fatal("slow at the first sight of a request")
	}
	if !tick() || !w.slow.Load() {
		t.Fatal("a request on the queue thread for a whole tick did not make the queue slow")
	}
	if tick() {
		t.Fatal("reported slow twice")
	}
	w.inlineDone.Add(1)
	tick()
	if !w.slow.Load() {
		t.Fatal("fast again right after the stall")
	}
	now = now.Add(stallHold)
	tick()
	if w.slow.Load() {
		t.Fatalf("still slow %v after the stall", stallHold)
	}

	// Inline requests that come and go are no stall.
	for range 5 {
		w.inlineStarted.Add(1)
		w.inlineDone.Add(1)
		w.inlineStarted.Add(1)
		if tick() {
			t.Fatal("a new request each tick taken for a stall")
		}
		w.inlineDone.Add(1)
	}

	// Workers: busy and completing is fine, busy and stuck is a stall.
	w.workStarted.Add(3)
	w.workDone.Add(1)
	if tick() {
		t.Fatal("workers that completed a request taken for a stall")
	}
	if !tick() {
		t.Fatal("workers that completed nothing in a tick did not make the queue slow")
	}
	w.workDone.Add(2)
	now = now.Add(stallHold)
	tick()
	if w.slow.Load() {
		t.Fatal("still slow after the workers finished")
	}
}
