package daemon

import (
	"testing"
	"time"
)

// close --deferred of a volume in use keeps it serving and closes it once
// it is released; cancel-deferred takes that back, and a plain close of a
// volume in use is still refused.
func TestDaemonDeferredClose(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	captureLog(t)
	busy := fakeBusy(t)
	fe, _, done := startFake(t, "dfr")

	if _, err := Close("dfr"); err == nil {
		t.Fatal("close of a volume in use succeeded")
	}
	_, deferred, err := CloseDeferred("dfr")
	if err != nil || !deferred {
		t.Fatalf("CloseDeferred: deferred %v, %v", deferred, err)
	}
	if err := CancelDeferred("dfr"); err != nil {
		t.Fatal(err)
	}
	busy.Store(false)
	time.Sleep(100 * time.Millisecond) // ten polls
	if fe.Last().Detaches() != 0 || !Alive("dfr") {
		t.Fatal("a cancelled deferred close closed the volume")
	}

	busy.Store(true)
	if _, deferred, err = CloseDeferred("dfr"); err != nil || !deferred {
		t.Fatalf("CloseDeferred: deferred %v, %v", deferred, err)
	}
	time.Sleep(100 * time.Millisecond)
	if fe.Last().Detaches() != 0 || !Alive("dfr") {
		t.Fatal("a deferred close took the device away while it was in use")
	}
	busy.Store(false)
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if fe.Last().Detaches() != 1 || Alive("dfr") {
		t.Fatal("the daemon did not close once the device was released")
	}
}

// close --deferred of a volume not in use closes it at once.
func TestDaemonDeferredCloseNotInUse(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	captureLog(t)
	_, _, done := startFake(t, "dfr2")
	if _, deferred, err := CloseDeferred("dfr2"); err != nil || deferred {
		t.Fatalf("CloseDeferred: deferred %v, %v", deferred, err)
	}
	if err := waitDaemon(t, done); err != nil || Alive("dfr2") {
		t.Fatalf("daemon: %v (alive %v)", err, Alive("dfr2"))
	}
}
