package daemon

import (
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// An acknowledged write lost by a failed flush, then the backend healed:
// close works (exit 0) and warns, naming the loss; the log says so too.
// The frontend's own flush on detach (the kernel's, for NBD) must not turn
// the old loss into a failed close.
func TestDaemonCloseAfterLostWriteWarns(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	logged := captureLog(t)
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	tracked := blockdev.Track(faulty)
	fe, done := startFakeDev(t, "lost", opened{dev: tracked, takeLost: tracked.TakeLostWrites})
	fe.Last().AsKernel.Store(true)
	dev := fe.Last().Dev
	if _, err := dev.WriteAt(make([]byte, 4096), 8192); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultFlush, 0, 0)
	if err := dev.Flush(); err == nil {
		t.Fatal("the failing flush succeeded")
	}
	faulty.Heal()
	if err := dev.Flush(); err == nil {
		t.Fatal("a flush after the lost write succeeded")
	}
	if warning, err := Close("lost"); err != nil || !strings.HasPrefix(warning, "4096 bytes in 1 ranges") {
		t.Fatalf("close after healing: %v (warning %q)", err, warning)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if !strings.Contains(logged.String(), "lost: closed; 4096 bytes in 1 ranges (the first at offset 8192) may not have reached the device") ||
		strings.Contains(logged.String(), "lost: flush:") {
		t.Fatalf("log (one line for the loss): %s", logged)
	}
}

// Close while the backend still fails: the final flush fails and close
// says so.
func TestDaemonCloseWhileFailing(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	captureLog(t)
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	tracked := blockdev.Track(faulty)
	fe, done := startFakeDev(t, "failing", opened{dev: tracked, takeLost: tracked.TakeLostWrites})
	if _, err := fe.Last().Dev.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	faulty.FailAll()
	_, err := Close("failing")
	if err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("close while the device fails: %v", err)
	}
	if err := waitDaemon(t, done); err == nil {
		t.Fatal("the daemon reported success")
	}
	if Alive("failing") {
		t.Fatal("the daemon is still active")
	}
}
