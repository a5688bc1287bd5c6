package daemon

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestOpenWaitsForDyingDaemon: when the lock holder recorded in the state
// is no longer running (SIGKILLed, last threads exiting), open waits for
// the lock instead of failing with "already exists".
func TestOpenWaitsForDyingDaemon(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	lock, err := claimName("dying")
	if err != nil {
		t.Fatal(err)
	}
	st := sampleState()
	st.Name = "dying"
	st.PID = os.Getpid()
	writeState(st)
	if lockReleasedByDyingDaemon("dying") {
		t.Fatal("a running daemon's lock counted as released")
	}
	// A pid that has exited: a child that was reaped.
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	st.PID = child.Process.Pid
	writeState(st)
	go func() {
		time.Sleep(100 * time.Millisecond)
		releaseName("dying", lock)
	}()
	if !lockReleasedByDyingDaemon("dying") {
		t.Fatal("did not wait for a dead daemon's lock")
	}
}

// CheckFree refuses a name a live daemon holds, in cryptsetup's words.
func TestCheckFree(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	if err := CheckFree("free"); err != nil {
		t.Fatalf("CheckFree of a free name: %v", err)
	}
	lock, err := claimName("taken")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseName("taken", lock)
	st := sampleState()
	st.Name, st.PID = "taken", os.Getpid()
	writeState(st)
	if err := CheckFree("taken"); !errors.Is(err, ErrExists) || err.Error() != "Device taken already exists." {
		t.Fatalf("CheckFree of an active name: %v", err)
	}
}
