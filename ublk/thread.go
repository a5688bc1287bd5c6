package ublk

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// A queue's thread is, to ublk_drv, the ublk server of that queue for as
// long as it lives. A ring whose commands the kernel still holds must
// therefore close only after its thread has ended: on Linux 6.12 (ublk_drv
// before f40139fde527, "ublk: fix race between
// io_uring_cmd_complete_in_task and ublk_cancel_cmd", Linux 6.15) closing
// it while the thread lives lets a request that lands on a command being
// cancelled complete that command a second time, from the thread's task
// work, and the kernel frees it twice (a BUG in mm/slub.c or a NULL
// dereference in io_req_caches_free, from io_ring_exit_work). A daemon
// that is killed does this right by itself: its threads are dying before
// its rings close.

// goLockedThread runs fn on a new goroutine locked to an OS thread that
// ends when fn returns. Go ends a locked thread when its goroutine exits,
// except the process's main thread, which it parks for good instead; so fn
// never runs there.
func goLockedThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// While this goroutine holds the main thread no other can run on
		// it: start fn's goroutine, and let the main thread go once that
		// one holds a thread of its own.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			fn()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// waitThreadGone waits up to limit for thread tid of this process to have
// exited, and reports whether it has.
func waitThreadGone(tid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for unix.Tgkill(unix.Getpid(), tid, 0) != unix.ESRCH {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
