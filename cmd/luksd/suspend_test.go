package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
)

// startLUKSVolume runs a daemon for name (fake frontend) over a LUKS2
// image cryptsetup formatted, and returns the served device and the
// passphrase's key file; the volume is closed when the test ends.
func startLUKSVolume(t *testing.T, name string) (blockdev.Device, string) {
	t.Helper()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	cs, img, pass := claimFixture(t)
	captureLog(t)
	fe := fakeFrontend()
	dump := runTool(t, nil, cs, "luksDump", "--dump-volume-key", "-q", "--key-file", pass, img)
	v := imageVolume(t, img, img, testtool.VolumeKey(t, dump.stdout))
	done := startDaemon(t, v.spec(name, daemon.Options{Frontend: fe.Name()}), v.Key)
	t.Cleanup(func() { closeVolume(name); waitDaemon(t, done) })
	return fe.Last().Dev, pass
}

// TestSuspendResume: luksSuspend holds I/O of a running volume (a read
// through the served device waits) and status says so; close is refused
// meanwhile; luksResume with a wrong passphrase fails with exit 2 and the
// volume stays suspended; with the right one the waiting read finishes
// with the data written before. cryptsetup's messages for volumes that
// are not active or not suspended.
func TestSuspendResume(t *testing.T) {
	dev, pass := startLUKSVolume(t, "sus")
	want := bytes.Repeat([]byte("luksd"), 1000)
	if _, err := dev.WriteAt(want, 8192); err != nil {
		t.Fatal(err)
	}

	luksd(t, nil, "luksSuspend", "nothere").expect(t, exitDevice, "Device nothere is not active.")
	luksd(t, nil, "luksResume", "sus").expect(t, exitParams, "Volume sus is not suspended.")
	luksd(t, nil, "luksSuspend", "sus").expect(t, 0, "")
	luksd(t, nil, "luksSuspend", "sus").expect(t, exitParams, "Volume sus is already suspended.")
	if r := luksd(t, nil, "status", "sus"); !strings.Contains(r.stdout, "  mode:    read/write (suspended)\n") {
		t.Errorf("status of a suspended volume:\n%s", r.stdout)
	}
	got := make([]byte, len(want))
	read := make(chan error, 1)
	go func() { _, err := dev.ReadAt(got, 8192); read <- err }()
	select {
	case err := <-read:
		t.Fatalf("a read finished while suspended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if r := luksd(t, nil, "close", "sus"); r.code == 0 || !strings.Contains(r.stderr, "suspended") {
		t.Errorf("close of a suspended volume: exit %d %q", r.code, r.stderr)
	}
	wrong := testtool.KeyFile(t, []byte("not the passphrase"))
	luksd(t, nil, "luksResume", "--key-file", wrong, "sus").expect(t, exitPermission, "No key available with this passphrase.")
	select {
	case err := <-read:
		t.Fatalf("a read finished after a failed resume: %v", err)
	default:
	}
	luksd(t, nil, "luksResume", "--key-file", pass, "sus").expect(t, 0, "")
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("data read after resume differs")
	}
	if r := luksd(t, nil, "status", "sus"); !strings.Contains(r.stdout, "  mode:    read/write\n") {
		t.Errorf("status after resume:\n%s", r.stdout)
	}
}
