package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

func TestSpecPipeRoundTrip(t *testing.T) {
	want := Spec{Name: "v", Location: "/a", Header: "/b", Type: "LUKS2", UUID: "u", KeySlot: 3,
		Segment: Segment{Cipher: "aes-xts-plain64", Offset: 16 << 20, Size: 1 << 30, SectorSize: 4096, KeySize: 4},
		Segments: []Segment{{Cipher: "aes-xts-plain64", Offset: 16 << 20, Size: 1 << 20, SectorSize: 4096, KeySize: 2},
			{Cipher: "aes-cbc-essiv:sha256", Offset: 17 << 20, SectorSize: 512, KeySize: 2, KeyOffset: 2, IVOffset: 2048}},
		Options: Options{Frontend: "nbd", Device: "/dev/nbd2", ReadOnly: true, AllowDiscards: true, Recover: true, IOTimeout: 90 * time.Second}}
	var b bytes.Buffer
	if err := writeSpec(&b, want, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	got, key, err := readSpec(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer key.Wipe()
	if !reflect.DeepEqual(got, want) || !bytes.Equal(key.Bytes(), []byte{1, 2, 3, 4}) {
		t.Fatalf("got %+v key %v", got, key.Bytes())
	}
	// A short key is an error, not a shorter key.
	b.Reset()
	writeSpec(&b, want, []byte{1, 2, 3, 4})
	b.Truncate(b.Len() - 2)
	if _, _, err := readSpec(&b); err == nil {
		t.Fatal("short key accepted")
	}
	if _, _, err := readSpec(strings.NewReader("\x00\x00\x00\x02{}")); err == nil {
		t.Fatal("spec without a key length accepted")
	}
}

func TestReadyLine(t *testing.T) {
	if dev, code, msg := parseReady(formatReady("/dev/nbd1", 0, nil)); dev != "/dev/nbd1" || code != 0 || msg != "" {
		t.Fatalf("ok line parsed to %q %d %q", dev, code, msg)
	}
	line := formatReady("", 5, errors.New("Device v already\nexists."))
	if dev, code, msg := parseReady(line); dev != "" || code != 5 || msg != "Device v already exists." {
		t.Fatalf("error line %q parsed to %q %d %q", line, dev, code, msg)
	}
	if dev, code, msg := parseReady(""); dev != "" || code != 0 || msg != "" {
		t.Fatal("empty line parsed as a result")
	}
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

// TestDaemonReportsOverPipe runs the real binary as the daemon: a failure
// before the device exists comes back on the ready pipe with its exit code
// (the CLI's, for the daemon's kind of error).
func TestDaemonReportsOverPipe(t *testing.T) {
	bin := testtool.Luksd(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	try := func(config []byte) string {
		t.Helper()
		cfgR, cfgW, _ := os.Pipe()
		readyR, readyW, _ := os.Pipe()
		cmd := exec.Command(bin, ChildVerb, "--config-fd", "3", "--ready-fd", "4")
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
	writeSpec(&b, Spec{Name: "v", Location: "/nonexistent", Header: "/nonexistent", Options: Options{Frontend: "bogus"}}, []byte{7, 7})
	if line := try(b.Bytes()); line != "error 1 unknown frontend \"bogus\"\n" {
		t.Fatalf("ready line %q", line)
	}
	b.Reset()
	writeSpec(&b, Spec{Name: "v", Location: "/nonexistent", Header: "/nonexistent", Options: Options{Frontend: "nbd"}}, []byte{7, 7})
	if line := try(b.Bytes()); line != "error 4 Device /nonexistent does not exist or access denied.\n" {
		t.Fatalf("ready line %q", line)
	}
	if line := try([]byte("junk")); !strings.HasPrefix(line, "error 1 ") || !strings.Contains(line, "configuration") {
		t.Fatalf("ready line %q", line)
	}
}
