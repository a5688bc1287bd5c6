package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
)

func TestOpenArguments(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	img := testtool.ImageAt(t, t.TempDir(), "img", 1<<20)
	luksd(t, nil, "open").expect(t, exitParams, "open: requires <device> [--type <type>] [<name>] as arguments")
	luksd(t, nil, "open", img).expect(t, exitParams, "Command requires device and mapped name as arguments.")
	luksd(t, nil, "open", img, "a/b").expect(t, exitParams, "Invalid device name")
	luksd(t, nil, "open", "--type", "loopaes", img, "v").expect(t, exitParams, "Device type loopaes is not supported by luksd")
	luksd(t, nil, "open", "--device-size", "1m", img, "v").expect(t, exitParams, "Option --device-size is not supported by luksd for LUKS devices.")
	luksd(t, nil, "open", "--type", "plain", "--offset", "4096", "-d", img, img, "v").expect(t, exitParams, "Requested offset is beyond real size of device "+img+".")
	luksd(t, nil, "open", "--nbd-device", "/dev/sda", img, "v").expect(t, exitParams, "is not an NBD device")
	luksd(t, nil, "open", "--frontend", "ublk", "--nbd-device", "/dev/nbd0", img, "v").expect(t, exitParams, "--nbd-device needs --frontend nbd")
	luksd(t, nil, "open", "--nbd-device", "/dev/nbd0", "--ublk-device", "0", img, "v").expect(t, exitParams, "exclude each other")
	// Not a LUKS device: refused before any passphrase is asked for.
	luksd(t, nil, "open", img, "v").expect(t, exitParams, "is not a valid LUKS device")
	// Options after the positional arguments, as cryptsetup takes them.
	luksd(t, nil, "luksOpen", img, "v", "--type", "luks3").expect(t, exitParams, "Unrecognized metadata device type luks3.")
}

// TestOpenRefusesActiveName: exit 5 when NAME is active (a daemon in this
// process), or when the image is already mapped under another name.
func TestOpenRefusesActiveName(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	_, done := startFake(t, "busy")
	st, err := daemon.Active("busy")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	img := testtool.ImageAt(t, t.TempDir(), "img", 1<<20)
	luksd(t, nil, "open", img, "busy").expect(t, exitBusy, "Device busy already exists.")
	luksd(t, nil, "open", st.Image, "other").expect(t, exitBusy, "Cannot use device "+st.Image+" which is in use (already mapped or mounted).")
	stopVolume(t, "busy", done)
}

func TestOpenTestPassphrase(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	key := testtool.KeyFile(t, []byte("right passphrase"))
	bad := testtool.KeyFile(t, []byte("wrong passphrase"))
	testtool.CryptsetupFormat(t, img, key, "--type", "luks2")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, img).expect(t, 0, "")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", bad, img).expect(t, exitPermission, "No key available with this passphrase.")
	// A LUKS2 header is not LUKS1: refused before unlocking.
	luksd(t, nil, "open", "--type", "luks1", "--key-file", key, img, "v").expect(t, exitParams, "Device "+img+" is not a valid LUKS device.")
	luksd(t, nil, "open", "--test-passphrase", "--type", "luks1", "--key-file", key, img).expect(t, exitParams, "Device "+img+" is not a valid LUKS device.")
}

// The daemon's verb is luksd's own: without the pipe it is refused.
func TestDaemonVerbIsInternal(t *testing.T) {
	luksd(t, nil, daemon.ChildVerb).expect(t, exitParams, "internal daemon verb")
}

// TestSpawnDaemonExitCode: the parent of a background daemon fails with
// the daemon's message and exit code.
func TestSpawnDaemonExitCode(t *testing.T) {
	if !hasCapability(24) { // CAP_SYS_RESOURCE
		t.Skip("SKIP (not a pass): PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE, which this process lacks")
	}
	old := daemon.Exe
	daemon.Exe = testtool.Luksd(t)
	defer func() { daemon.Exe = old }()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	key, err := keyring.FromBytes([]byte{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	// Its own goroutine: spawning locks the OS thread it runs on.
	go func() {
		_, err := daemon.Spawn(daemon.Spec{Name: "v", Location: "/nonexistent", Header: "/nonexistent", Options: daemon.Options{Frontend: "nbd"}}, key)
		done <- err
	}()
	err = <-done
	if exitCodeOf(err) != exitDevice || !strings.Contains(err.Error(), "/nonexistent does not exist") {
		t.Fatalf("daemon.Spawn = %v (exit %d), want exit 4 about the device", err, exitCodeOf(err))
	}
	if key.Len() != 0 {
		t.Fatal("the parent kept the volume key after handing it over")
	}
}

// hasCapability reports whether capability bit n is in this process's
// effective set.
func hasCapability(n uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<n) != 0
		}
	}
	return false
}
