package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// luksd reencrypt on a LUKS1 volume refuses in one line (exit 1, as
// cryptsetup's unsupported requests) that says the way forward, and
// writes nothing (cryptsetup 2.6.1's legacy path, without device-mapper,
// fails after changing the header's magic). Following the line works:
// convert, then reencrypt, and the data written before reads back. A
// volume cryptsetup will not convert either is told so, with its reason;
// one that is open is told to close first.
func TestReencryptLUKS1(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	img := testtool.ImageAt(t, w.dir, "luks1.img", 24<<20)
	w.cs(nil, append([]string{"luksFormat", "-q", "--type", "luks1", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)

	// Data written through luksd serve before.
	sock := w.path("serve.sock")
	p := startServe(t, sock, "-d", key, img)
	data := make([]byte, 4<<20)
	rand.Read(data)
	src := w.path("src")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", "--flush", src, p.uri())

	// Open: close it first.
	before, _ := os.ReadFile(img)
	for _, arg := range []string{img, fmt.Sprintf("serve-%d", p.cmd.Process.Pid)} {
		w.luksd(nil, "reencrypt", "-q", "-d", key, arg).expect(t, exitParams,
			"Device "+img+" is a LUKS1 device: luksd reencrypts LUKS2 only. Close it, convert it (luksd convert --type luks2 "+img+"), then reencrypt it.")
	}
	p.stop(t)

	refusal := "Device " + img + " is a LUKS1 device: luksd reencrypts LUKS2 only. Convert it first (luksd convert --type luks2 " + img + "), then reencrypt it."
	for _, args := range [][]string{{}, {"--cipher", "aes-xts-plain64", "--key-size", "256"}, {"--resume-only"}, {"--decrypt", "--header", w.path("new.hdr")}} {
		w.luksd(nil, append(append([]string{"reencrypt", "-q", "-d", key}, args...), img)...).expect(t, exitParams, refusal)
		if after, _ := os.ReadFile(img); !bytes.Equal(after, before) {
			t.Fatalf("reencrypt %v of a LUKS1 volume changed it", args)
		}
	}
	if _, err := os.Stat(w.path("new.hdr")); err == nil {
		t.Error("a refused --decrypt of a LUKS1 volume made its header file")
	}
	// cryptsetup exits 1 too (its legacy path fails here), after leaving
	// its LUKS-UUID.{log,org,new} files in its working directory.
	twin := w.path("twin.img")
	copyFile(t, img, twin)
	cs := exec.Command(w.cryptsetup, "reencrypt", "-q", "--force-offline-reencrypt", "-d", key, twin)
	cs.Dir = t.TempDir()
	if out, err := cs.CombinedOutput(); cs.ProcessState == nil || cs.ProcessState.ExitCode() != exitParams {
		t.Errorf("cryptsetup reencrypt of a LUKS1 image: %v, want exit %d (%s)", err, exitParams, out)
	}

	// The way forward works.
	w.luksd(nil, "convert", "-q", "--type", "luks2", img).ok(t)
	w.luksd(nil, "reencrypt", "-q", "-d", key, "--cipher", "aes-xts-plain64", "--key-size", "256", img).ok(t)
	if s := w.cs(nil, "luksDump", img).ok(t).stdout; !strings.Contains(s, "Version:       \t2") || strings.Contains(s, "reencrypt") ||
		!strings.Contains(s, "cipher: aes-xts-plain64") {
		t.Fatalf("after convert and reencrypt:\n%s", s)
	}
	p = startServe(t, sock, "-d", key, "--readonly", img)
	back := w.path("back")
	testtool.Run(t, "nbdcopy", p.uri(), back)
	p.stop(t)
	if got, _ := os.ReadFile(back); !bytes.Equal(got[:len(data)], data) {
		t.Fatal("after convert and reencrypt the data differs from what was written to the LUKS1 volume")
	}

	// A LUKS1 layout cryptsetup refuses to convert (keyslots end too
	// close to the data for the LUKS2 areas): the line says so and why.
	odd := testtool.ImageAt(t, w.dir, "odd.img", 20<<20)
	w.cs(nil, append([]string{"luksFormat", "-q", "--type", "luks1", "--key-size", "256", "--align-payload", "2056", odd, key},
		cheapPBKDF("pbkdf2")...)...).ok(t)
	oddTwin := w.path("odd-twin.img")
	copyFile(t, odd, oddTwin)
	conv := w.cs(nil, "convert", "-q", "--type", "luks2", oddTwin)
	if conv.code == 0 {
		t.Fatal("cryptsetup converted the odd LUKS1 layout: the case tests nothing")
	}
	why := strings.TrimSuffix(strings.TrimSpace(conv.stderr), ".")
	before, _ = os.ReadFile(odd)
	w.luksd(nil, "reencrypt", "-q", "-d", key, odd).expect(t, exitParams,
		"Device "+odd+" is a LUKS1 device: luksd reencrypts LUKS2 only, and it cannot be converted to LUKS2 ("+why+"). Copy its data to a new LUKS2 volume.")
	if after, _ := os.ReadFile(odd); !bytes.Equal(after, before) {
		t.Fatal("reencrypt of an unconvertible LUKS1 volume changed it")
	}
}
