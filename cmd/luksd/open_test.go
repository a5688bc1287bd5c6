package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
)

func TestOpenArguments(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	img := zeroFile(t, t.TempDir(), "img", 1<<20)
	luksd(t, nil, "open").expect(t, exitParams, "open: requires <device> [--type <type>] [<name>] as arguments")
	luksd(t, nil, "open", img).expect(t, exitParams, "Command requires device and mapped name as arguments.")
	luksd(t, nil, "open", img, "a/b").expect(t, exitParams, "Invalid device name")
	luksd(t, nil, "open", "--type", "plain", img, "v").expect(t, exitParams, "Device type plain is not supported by luksd")
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
	_, _, done := startFake(t, "busy")
	st, err := activeState("busy")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	img := zeroFile(t, t.TempDir(), "img", 1<<20)
	luksd(t, nil, "open", img, "busy").expect(t, exitBusy, "Device busy already exists.")
	luksd(t, nil, "open", st.Image, "other").expect(t, exitBusy, "Cannot use device "+st.Image+" which is in use (already mapped or mounted).")
	if err := closeVolume("busy"); err != nil {
		t.Fatal(err)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestOpenTestPassphrase(t *testing.T) {
	cs := testtool.Need(t, "cryptsetup")
	dir := t.TempDir()
	img := zeroFile(t, dir, "img", 20<<20)
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("right passphrase"), 0o600)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("wrong passphrase"), 0o600)
	runTool(t, nil, cs, "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--key-file", key, img).expect(t, 0, "")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, img).expect(t, 0, "")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", bad, img).expect(t, exitPermission, "No key available with this passphrase.")
	// A LUKS2 header is not LUKS1: refused before unlocking.
	luksd(t, nil, "open", "--type", "luks1", "--key-file", key, img, "v").expect(t, exitParams, "Device "+img+" is not a valid LUKS device.")
	luksd(t, nil, "open", "--test-passphrase", "--type", "luks1", "--key-file", key, img).expect(t, exitParams, "Device "+img+" is not a valid LUKS device.")
}

func TestSpecPipeRoundTrip(t *testing.T) {
	want := daemonSpec{Name: "v", Image: "/a", Header: "/b", Frontend: "nbd", Device: "/dev/nbd2",
		ReadOnly: true, AllowDiscards: true, Recover: true, IOTimeout: 90 * time.Second, Slot: 3, KeyLen: 4}
	var b bytes.Buffer
	if err := writeSpec(&b, want, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	got, key, err := readSpec(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer key.Wipe()
	if got != want || !bytes.Equal(key.Bytes(), []byte{1, 2, 3, 4}) {
		t.Fatalf("got %+v key %v", got, key.Bytes())
	}
	// A short key is an error, not a shorter key.
	b.Reset()
	writeSpec(&b, want, []byte{1, 2})
	if _, _, err := readSpec(&b); err == nil {
		t.Fatal("short key accepted")
	}
	if _, _, err := readSpec(strings.NewReader("\x00\x00\x00\x02{}")); err == nil {
		t.Fatal("spec without a key length accepted")
	}
}

func TestReadyLine(t *testing.T) {
	if dev, code, msg := parseReady(formatReady("/dev/nbd1", nil)); dev != "/dev/nbd1" || code != 0 || msg != "" {
		t.Fatalf("ok line parsed to %q %d %q", dev, code, msg)
	}
	line := formatReady("", exitf(exitBusy, "Device v already\nexists."))
	if dev, code, msg := parseReady(line); dev != "" || code != exitBusy || msg != "Device v already exists." {
		t.Fatalf("error line %q parsed to %q %d %q", line, dev, code, msg)
	}
	if dev, code, msg := parseReady(""); dev != "" || code != 0 || msg != "" {
		t.Fatal("empty line parsed as a result")
	}
}

// TestDaemonReportsOverPipe runs the real binary as the daemon: a failure
// before the device exists comes back on the ready pipe with its exit code.
func TestDaemonReportsOverPipe(t *testing.T) {
	bin := testtool.Luksd(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	try := func(config []byte) string {
		t.Helper()
		cfgR, cfgW, _ := os.Pipe()
		readyR, readyW, _ := os.Pipe()
		cmd := exec.Command(bin, daemonVerb, "--config-fd", "3", "--ready-fd", "4")
		cmd.ExtraFiles = []*os.File{cfgR, readyW}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cfgR.Close()
		readyW.Close()
		cfgW.Write(config)
		cfgW.Close()
		line, _ := bufio.NewReader(readyR).ReadString('\n')
		readyR.Close()
		cmd.Wait()
		return line
	}
	var b bytes.Buffer
	writeSpec(&b, daemonSpec{Name: "v", Image: "/nonexistent", Header: "/nonexistent", Frontend: "bogus", KeyLen: 2}, []byte{7, 7})
	if line := try(b.Bytes()); line != "error 1 unknown frontend \"bogus\"\n" {
		t.Fatalf("ready line %q", line)
	}
	b.Reset()
	writeSpec(&b, daemonSpec{Name: "v", Image: "/nonexistent", Header: "/nonexistent", Frontend: "nbd", KeyLen: 2}, []byte{7, 7})
	if line := try(b.Bytes()); line != "error 4 Device /nonexistent does not exist or access denied.\n" {
		t.Fatalf("ready line %q", line)
	}
	if line := try([]byte("junk")); !strings.HasPrefix(line, "error 1 ") || !strings.Contains(line, "configuration") {
		t.Fatalf("ready line %q", line)
	}
	luksd(t, nil, daemonVerb).expect(t, exitParams, "internal daemon verb")
}

// TestSpawnDaemonExitCode: the parent of a background daemon fails with
// the daemon's message and exit code.
func TestSpawnDaemonExitCode(t *testing.T) {
	if !hasCapability(24) { // CAP_SYS_RESOURCE
		t.Skip("SKIP (not a pass): PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE, which this process lacks")
	}
	old := selfExe
	selfExe = testtool.Luksd(t)
	defer func() { selfExe = old }()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	key, err := keyring.FromBytes([]byte{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	// Its own goroutine: spawning locks the OS thread it runs on.
	go func() {
		_, err := spawnDaemon(daemonSpec{Name: "v", Image: "/nonexistent", Header: "/nonexistent", Frontend: "nbd", KeyLen: 4}, &volume{Key: key})
		done <- err
	}()
	err = <-done
	if exitCode(err) != exitDevice || !strings.Contains(err.Error(), "/nonexistent does not exist") {
		t.Fatalf("spawnDaemon = %v (exit %d), want exit 4 about the device", err, exitCode(err))
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

func TestSdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	sdNotify("READY=1")
	buf := make([]byte, 64)
	l.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := l.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("systemd got %q, %v", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	sdNotify("READY=1") // no socket: nothing happens
}

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
