package ublk

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
)

// timeoutQueue is a queue in copy mode with one tag, served by hand: what
// its worker hands the queue thread lands in q.finished.
func timeoutQueue(t *testing.T, hold *devtest.Hold, timeout time.Duration) *queue {
	t.Helper()
	return &queue{
		depth:   1,
		timeout: timeout,
		h:       newHandler(hold, false, false, nil),
		bufs:    [][]byte{make([]byte, 64<<10)},
		wakeFD:  -1,
	}
}

func (q *queue) results() []finished {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]finished(nil), q.finished...)
}

// TestRequestTimeoutCompletesOnce: a request the stalled backend does not
// carry out in time is completed with EIO, once; when the backend comes
// back, the late result is dropped and the late read does not touch the
// tag's buffer, which the kernel has handed to the next request by then.
func TestRequestTimeoutCompletesOnce(t *testing.T) {
	mem := devtest.MemOf(bytes.Repeat([]byte("old data"), 8192))
	hold := devtest.NewHold(mem)
	q := timeoutQueue(t, hold, 100*time.Millisecond)
	hold.Stall()
	var wg sync.WaitGroup
	wg.Add(1)
	q.workers.Add(1)
	go func() { defer wg.Done(); q.serve(0, desc(opRead, 0, 8)) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(q.results()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := q.results(); len(got) != 1 || got[0] != (finished{0, -int32(syscall.EIO)}) {
		t.Fatalf("after the timeout: %v, want one -EIO", got)
	}
	// The kernel now hands tag 0 to a write whose data it copies in.
	next := bytes.Repeat([]byte("NEXT"), 1024)
	copy(q.bufs[0], next)
	hold.Release()
	wg.Wait()
	if got := q.results(); len(got) != 1 {
		t.Fatalf("completions %v: the request was completed twice", got)
	}
	if !bytes.Equal(q.bufs[0][:len(next)], next) {
		t.Fatal("the late read overwrote the tag's buffer")
	}
}

// TestRequestTimeoutNotWhenInTime: a request carried out in time completes
// with its own result, once.
func TestRequestTimeoutNotWhenInTime(t *testing.T) {
	mem := devtest.MemOf(bytes.Repeat([]byte("data"), 16384))
	q := timeoutQueue(t, devtest.NewHold(mem), time.Minute)
	q.workers.Add(1)
	q.serve(0, desc(opRead, 0, 8))
	if got := q.results(); len(got) != 1 || got[0] != (finished{0, 4096}) {
		t.Fatalf("completions %v, want one of 4096 bytes", got)
	}
	if !bytes.Equal(q.bufs[0][:4096], mem.Bytes()[:4096]) {
		t.Fatal("the read did not reach the tag's buffer")
	}
}
