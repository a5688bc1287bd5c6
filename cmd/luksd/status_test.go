package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/daemon"
)

func TestStatusText(t *testing.T) {
	s := &daemon.State{
		Name: "data", Device: "/dev/nbd3", Frontend: "nbd", PID: 4242,
		Image: "/srv/data.img", Header: "/srv/data.hdr", Type: "LUKS2",
		Cipher: "xchacha12,aes-adiantum-plain64", KeySize: 32, SectorSize: 4096, Offset: 16 << 20, Size: 1 << 30,
		ReadOnly: true, AllowDiscards: true, Claim: "O_EXCL",
	}
	var b bytes.Buffer
	s.Mapper, s.MapperKind = "/dev/mapper/data", "dm"
	if err := writeStatus(&b, "/dev/mapper/data", s, true); err != nil {
		t.Fatal(err)
	}
	want := `/dev/mapper/data is active and is in use.
  type:    LUKS2
  cipher:  xchacha12,aes-adiantum-plain64
  keysize: 256 bits
  key location: luksd daemon (pid 4242)
  device:  /srv/data.img
  sector size:  4096
  offset:  32768 sectors
  size:    2097152 sectors
  mode:    readonly
  flags:   discards 
  header:  /srv/data.hdr
  holder:  luksd pid 4242, exclusive (O_EXCL)
  frontend: nbd
  block device: /dev/nbd3
  mapping: /dev/mapper/data, device-mapper linear over /dev/nbd3
`
	if b.String() != want {
		t.Fatalf("status text:\n%s\nwant:\n%s", b.String(), want)
	}

	s.Header, s.ReadOnly, s.AllowDiscards = s.Image, false, false
	s.Claim = ""
	b.Reset()
	writeStatus(&b, "/dev/mapper/data", s, false)
	got := b.String()
	for _, absent := range []string{"header:", "flags:", "in use", "holder:"} {
		if bytes.Contains([]byte(got), []byte(absent)) {
			t.Errorf("status shows %q:\n%s", absent, got)
		}
	}
	if !bytes.Contains(b.Bytes(), []byte("/dev/mapper/data is active.\n")) || !bytes.Contains(b.Bytes(), []byte("  mode:    read/write\n")) {
		t.Errorf("status text:\n%s", got)
	}
}

// TestStatusVerb runs the luksd binary against a daemon in this process
// (fake frontend): status and close find it through LUKSD_RUN_DIR.
func TestStatusVerb(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	r := luksd(t, nil, "status", "nothere")
	if r.code != exitDevice || r.stdout != "/dev/mapper/nothere is inactive.\n" {
		t.Fatalf("status of an inactive name: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	luksd(t, nil, "status").expect(t, exitParams, "status: requires <name> as arguments")
	// Arguments after the name are ignored, as cryptsetup ignores them.
	if r := luksd(t, nil, "status", "nothere", "extra"); r.code != exitDevice || r.stdout != "/dev/mapper/nothere is inactive.\n" {
		t.Fatalf("status with an extra argument: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	luksd(t, nil, "status", "a/b").expect(t, exitParams, "Invalid device name")
	r = luksd(t, nil, "status", "/dev/nbd7")
	if r.code != exitDevice || r.stdout != "/dev/nbd7 is inactive.\n" {
		t.Fatalf("status of an unused device: exit %d, %q", r.code, r.stdout)
	}
	luksd(t, nil, "close", "/dev/nbd7").expect(t, exitDevice, "Device /dev/nbd7 is not active.")

	_, done := startFake(t, "shown")
	if r := luksd(t, nil, "status", "/dev/mapper/shown"); r.code != 0 || !strings.HasPrefix(r.stdout, "/dev/mapper/shown is active.") {
		t.Fatalf("status /dev/mapper/shown: exit %d %q", r.code, r.stdout)
	}
	r = luksd(t, nil, "status", "shown")
	if r.code != 0 {
		t.Fatalf("status exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"/dev/mapper/shown is active.\n", "  frontend: fake\n", "  block device: /nonexistent/fake-shown\n",
		"  mapping: " + os.Getenv("LUKSD_RUN_DIR") + "/mapper/shown, symlink to /nonexistent/fake-shown\n", "  offset:  32768 sectors\n", "  size:    2048 sectors\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	// Without device-mapper, /dev/mapper/NAME (here under the run
	// directory) is a symlink to the block device, gone after close.
	link := filepath.Join(os.Getenv("LUKSD_RUN_DIR"), "mapper", "shown")
	if target, err := os.Readlink(link); err != nil || target != "/nonexistent/fake-shown" {
		t.Errorf("mapper link %s: %q, %v", link, target, err)
	}
	luksd(t, nil, "close", "shown").expect(t, 0, "")
	if err := waitDaemon(t, done); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("close left %s: %v", link, err)
	}
	luksd(t, nil, "close", "shown").expect(t, exitDevice, "Device shown is not active.")
	luksd(t, nil, "luksClose", "shown").expect(t, exitDevice, "Device shown is not active.")
	luksd(t, nil, "status", "shown").expect(t, exitDevice, "")
}
