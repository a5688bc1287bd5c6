package ublk

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A queue's thread must end when its function returns (the kernel's ublk
// server task goes with it), and never be the main thread, which Go keeps.
func TestGoLockedThreadEnds(t *testing.T) {
	for range 50 {
		tids := make(chan int, 1)
		goLockedThread(func() { tids <- unix.Gettid() })
		tid := <-tids
		if tid == unix.Getpid() {
			t.Fatal("fn ran on the main thread")
		}
		if !waitThreadGone(tid, 10*time.Second) {
			t.Fatalf("thread %d still alive 10 s after fn returned", tid)
		}
	}
}

func TestWaitThreadGoneLiveThread(t *testing.T) {
	if waitThreadGone(unix.Gettid(), 20*time.Millisecond) {
		t.Fatal("waitThreadGone reported the calling thread gone")
	}
}
