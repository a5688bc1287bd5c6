package ublk

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// newTestRing returns a ring, or skips when this kernel forbids io_uring
// (a sandbox or io_uring_disabled): the ublk data path cannot run there either.
func newTestRing(t *testing.T, entries uint32) *ring {
	return newTestRingFlags(t, entries, 0)
}

func newTestRingFlags(t *testing.T, entries, flags uint32) *ring {
	t.Helper()
	r, err := newRingFlags(entries, flags)
	if errors.Is(err, errNoRing) {
		t.Skipf("SKIP (not a pass): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// NOPs go round the ring several times, so the head and tail indexes wrap
// past the ring size and the masks must map them back.
func TestRingNop(t *testing.T) { testRingNop(t, 0) }

// The queue threads' setup: one thread creates, submits and reaps.
func TestRingNopOneThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	testRingNop(t, setupOneThread)
}

func testRingNop(t *testing.T, flags uint32) {
	r := newTestRingFlags(t, 8, flags)
	if r.entries != 8 {
		t.Fatalf("ring has %d entries, asked for 8", r.entries)
	}
	next := uint64(0)
	for round := 0; round < 5; round++ {
		want := map[uint64]bool{}
		for i := 0; i < 8; i++ {
			s := r.nextSQE()
			if s == nil {
				t.Fatalf("round %d: ring full after %d SQEs", round, i)
			}
			s.opcode = uringOpNop
			s.userData = next
			want[next] = true
			next++
		}
		if s := r.nextSQE(); s != nil {
			t.Fatal("nextSQE returned a slot while the ring was full")
		}
		if err := r.submit(8); err != nil {
			t.Fatal(err)
		}
		n := r.reap(func(ud uint64, res int32) {
			if res != 0 {
				t.Errorf("NOP %d completed with %d", ud, res)
			}
			if !want[ud] {
				t.Errorf("unexpected completion %d", ud)
			}
			delete(want, ud)
		})
		if n != 8 || len(want) != 0 {
			t.Fatalf("round %d: reaped %d, missing %v", round, n, want)
		}
		if r.ready() != 0 || r.pending() != 0 {
			t.Fatalf("round %d: ready %d pending %d after reaping", round, r.ready(), r.pending())
		}
	}
}

// A URING_CMD on a file that has no uring_cmd handler fails in its CQE,
// not in io_uring_enter: errors of the command reach the caller as results.
func TestRingURingCmdResult(t *testing.T) {
	r := newTestRing(t, 4)
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	s := r.nextSQE()
	s.prepURingCmd(fds[0], ctrlOp(cmdGetFeatures, true), 42)
	if err := r.submit(1); err != nil {
		t.Fatal(err)
	}
	got := false
	r.reap(func(ud uint64, res int32) {
		got = true
		if ud != 42 {
			t.Errorf("user data %d, want 42", ud)
		}
		if res >= 0 {
			t.Errorf("URING_CMD on a pipe succeeded with %d", res)
		}
	})
	if !got {
		t.Fatal("no completion")
	}
}
