package daemon

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/luksd/luksd/blockdev"
	"golang.org/x/sys/unix"
)

// lockedMemory makes sure that what holds secrets or data in flight is
// locked in memory, and explains why that is enough.
//
// The daemon is in the kernel's block I/O path: under memory pressure the
// kernel writes dirty pages through it. PR_SET_IO_FLUSHER (set by the
// parent) keeps the daemon's own allocations from recursing into that
// writeback, so it cannot wait on itself for memory. What must never be
// swapped out is locked: the key schedule (openCrypt locks every
// object the cipher holds) and the buffers of requests in flight, where
// plaintext and ciphertext pass (blockdev.GetBuffer maps them outside the
// Go heap and locks them). The rest — code, the Go runtime, goroutine
// stacks, small heap objects — holds no key; if the kernel reclaims it,
// faulting it back reads the binary or swap, never this volume (swap on a
// luksd volume is not supported, as with nbd-client without -swap), so it
// can be slow but cannot deadlock. mlockall(MCL_FUTURE), used before,
// locked all of it, including the address space the Go runtime reserves:
// 84 MB resident and 1.26 GB VmLck per idle daemon.
func lockedMemory() error {
	blockdev.PutBuffer(blockdev.GetBuffer(1))
	if !blockdev.BuffersLocked() {
		return errors.New("cannot lock the daemon's I/O buffers in memory (mlock; RLIMIT_MEMLOCK too low?)")
	}
	return nil
}

// setIOFlusher marks the calling thread PR_SET_IO_FLUSHER. The flag is per
// thread, inherited by fork and clone and kept across execve, so the parent
// sets it on a locked thread right before starting the daemon: every thread
// of the daemon then carries it.
func setIOFlusher() error {
	if err := unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errors.New("cannot become an IO flusher (PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE; run as root)")
		}
		return fmt.Errorf("PR_SET_IO_FLUSHER: %v", err)
	}
	return nil
}

// checkIOFlusher verifies that this thread (and so the daemon, whose
// threads all descend from the first) is an IO flusher.
func checkIOFlusher() error {
	v, err := unix.PrctlRetInt(unix.PR_GET_IO_FLUSHER, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("PR_GET_IO_FLUSHER: %v", err)
	}
	if v != 1 {
		return fmt.Errorf("the daemon is not an IO flusher (PR_GET_IO_FLUSHER read %d)", v)
	}
	return nil
}

// startAsIOFlusher runs start (a fork or exec) on a thread marked
// PR_SET_IO_FLUSHER, so the daemon and all its threads inherit the mark.
// The thread stays locked: it is not handed back to other goroutines.
func startAsIOFlusher(start func() error) error {
	runtime.LockOSThread()
	if err := setIOFlusher(); err != nil {
		return err
	}
	return start()
}
