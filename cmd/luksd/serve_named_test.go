package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// nbdSize is the export's size as nbdinfo, a new client, is told it.
func nbdSize(t *testing.T, uri string) int64 {
	t.Helper()
	out, err := exec.Command(testtool.Need(t, "nbdinfo"), "--size", uri).Output()
	if err != nil {
		t.Fatalf("nbdinfo --size %s: %v", uri, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServeNamedResizeStatusClose: `serve --name NAME` is a volume of that
// name: status shows it, resize grows it to its image's new size and
// shrinks it to --size (new NBD clients see the size, qemu-io writes at
// the new end and reads it back), luksSuspend and luksResume reach it,
// and close ends the serve cleanly. A second volume cannot take the name.
func TestServeNamedResizeStatusClose(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 24<<20) // 16 MiB offset, 8 MiB data
	p := startServe(t, dir+"/s.sock", "--name", "sv", "--key-file", key, img)
	if got := nbdSize(t, p.uri()); got != 8<<20 {
		t.Fatalf("export size %d, want %d", got, 8<<20)
	}
	if got := statusSectors(t, "sv"); got != (8<<20)/512 {
		t.Fatalf("status size %d sectors", got)
	}
	luksd(t, nil, "serve", "--name", "sv", "--socket", dir+"/t.sock", "--key-file", key, img).expect(t, exitBusy, "Device sv already exists.")

	if err := os.Truncate(img, 40<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "resize", "sv").expect(t, 0, "")
	if got := nbdSize(t, p.uri()); got != 24<<20 {
		t.Fatalf("after growing: export size %d, want %d", got, 24<<20)
	}
	if got := statusSectors(t, "sv"); got != (24<<20)/512 {
		t.Fatalf("after growing: status size %d sectors", got)
	}
	qemuIO := testtool.Need(t, "qemu-io")
	out, err := exec.Command(qemuIO, "-f", "raw", "-c", "write -P 0x5a 20M 1M", "-c", "read -P 0x5a 20M 1M", p.uri()).CombinedOutput()
	if err != nil || strings.Contains(string(out), "fail") {
		t.Fatalf("qemu-io at the new end: %v\n%s", err, out)
	}
	luksd(t, nil, "resize", "--size", "20000", "sv").expect(t, 0, "")
	if got := nbdSize(t, p.uri()); got != 20000*512 {
		t.Fatalf("after shrinking: export size %d, want %d", got, 20000*512)
	}
	luksd(t, nil, "resize", "--device-size", "100M", "sv").expect(t, exitParams, "is too small.")

	luksd(t, nil, "luksSuspend", "sv").expect(t, 0, "")
	if s := luksd(t, nil, "status", "sv").stdout; !strings.Contains(s, "(suspended)") || !strings.Contains(s, "export:  unix socket "+p.sock) {
		t.Fatalf("status of a suspended serve:\n%s", s)
	}
	luksd(t, nil, "luksResume", "--key-file", key, "sv").expect(t, 0, "")
	luksd(t, nil, "close", "sv").expect(t, 0, "")
	if err := <-p.exited; err != nil {
		t.Fatalf("serve after close: %v\n%s", err, p.stderr)
	}
	if _, err := os.Stat(p.sock); err == nil {
		t.Errorf("socket left behind")
	}
	luksd(t, nil, "status", "sv").expect(t, exitDevice, "")
}
