package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Encryption in place with a detached header (reencrypt --encrypt
// --header HDR, no data shift) across tools: one starts it and is killed
// -9 part-way at a fixed point (strace injects the kill at a sync, so no
// timing loop), the other finishes it; the data then decrypts to the
// plaintext and luksd opens the volume with --header.

// killedAt runs prog under strace, which kills it with SIGKILL when it
// enters syscall for the n-th time.
func killedAt(t *testing.T, strace, syscall string, n int, prog string, args ...string) {
	t.Helper()
	inject := fmt.Sprintf("inject=%s:signal=KILL:when=%d", syscall, n)
	cmd := exec.Command(strace, append([]string{"-f", "-o", "/dev/null", "-e", "trace=" + syscall, "-e", inject, prog}, args...)...)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("%s was not killed at %s #%d: %s", prog, syscall, n, out)
	}
}

// checkEncryptedDetached fails unless hdr is a LUKS2 header out of
// reencryption whose data on img, all of it, decrypts to want.
func (w *workspace) checkEncryptedDetached(img, hdr, key string, want []byte) {
	w.t.Helper()
	got, off := w.segmentData(img, hdr, key, -1)
	if off != 0 {
		w.t.Fatalf("%s: data at offset %d, want 0", hdr, off)
	}
	if i := firstDiff(got, want); i >= 0 || len(got) != len(want) {
		w.t.Fatalf("%s: data differs from byte %d", img, i)
	}
}

func TestEncryptDetachedResumesAcrossTools(t *testing.T) {
	strace := testtool.Need(t, "strace") // kills a run at a fixed point
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	plain := make([]byte, 4<<20)
	rand.Read(plain)
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt", "--hotzone-size", "1M"}
	for _, c := range []struct {
		first, second string
		sync          string // the first tool is killed entering its second hotzone's data sync
		n             int
	}{
		{w.cryptsetup, ld, "fdatasync", 2},
		// luksd syncs the header 4 times per commit, the data once.
		{ld, w.cryptsetup, "fsync", 14},
	} {
		img, hdr := w.path("data.img"), w.path("data.hdr")
		os.Remove(hdr)
		if err := os.WriteFile(img, plain, 0o600); err != nil {
			t.Fatal(err)
		}
		init := append([]string{"reencrypt", "--encrypt", "--init-only", "--header", hdr, img}, append(flags, cheapPBKDF("pbkdf2")...)...)
		runTool(t, nil, c.first, init...).ok(t)
		resume := append([]string{"reencrypt", "--resume-only", "--header", hdr, img}, flags...)
		killedAt(t, strace, c.sync, c.n, c.first, resume...)
		// Part-way: a hotzone left as a rule (luksd's sync count can
		// shift by one with its goroutines), else between two hotzones.
		mid := w.cs(nil, "luksDump", "--dump-json-metadata", hdr).ok(t).stdout
		if !strings.Contains(mid, "online-reencrypt") || !strings.Contains(mid, `"type":"linear"`) {
			t.Fatalf("%s killed at %s #%d is not part-way: %s", c.first, c.sync, c.n, mid)
		}
		// As after its own kill, cryptsetup recovers a hotzone in repair
		// (killed in the last one, luksd's sync count can shift that far,
		// the repair finishes the encryption).
		var r result
		if c.second == w.cryptsetup {
			r = w.csResume(key, hdr, img, resume...)
		} else {
			r = runTool(t, nil, c.second, resume...)
		}
		if r.code != 0 {
			t.Fatalf("%s after %s: exit %d: %s", c.second, c.first, r.code, r.stderr)
		}
		w.checkEncryptedDetached(img, hdr, key, plain)
		runTool(t, nil, ld, "open", "--test-passphrase", "--header", hdr, "-d", key, img).ok(t)
	}
}

// What cryptsetup refuses for --encrypt --header, luksd refuses with its
// words and exit code, the data image unchanged.
func TestEncryptDetachedRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	plainImg := w.path("plain.img")
	plain := make([]byte, 1<<20)
	rand.Read(plain)
	if err := os.WriteFile(plainImg, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	luks, _ := w.formatted("pbkdf2")
	luksHdr := w.path("luks.hdr")
	w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", luksHdr, plainImg}, cheapPBKDF("pbkdf2")...)...).ok(t)
	marked := w.path("marked.img")
	copyFile(t, luks, marked)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, marked).ok(t)
	for n, c := range []struct {
		img  string
		args []string
	}{
		{luks, []string{"--header", "{new}"}},   // the data device is LUKS
		{marked, []string{"--header", "{new}"}}, // in reencryption already
		{luks, []string{"--header", "{new}", "--reduce-device-size", "8M"}},
		{marked, []string{"--header", "{new}", "--reduce-device-size", "8M"}},
		{plainImg, []string{"--header", luksHdr}},                              // the header is LUKS already
		{plainImg, []string{"--header", "{new}", "--resume-only"}},             // nothing to resume
		{plainImg, []string{"--header", "{new}", "--resilience", "datashift"}}, // no shift
		{plainImg, []string{"--header", "{new}", "--resilience", "foo"}},
	} {
		var res [2]result
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			img, hdr := w.path("copy.img"), w.path(fmt.Sprintf("new%d-%d.hdr", n, i))
			copyFile(t, c.img, img)
			args := []string{"reencrypt", "--encrypt", "--force-offline-reencrypt", "-q", "-d", key, img}
			for _, a := range c.args {
				args = append(args, strings.ReplaceAll(a, "{new}", hdr))
			}
			res[i] = runTool(t, nil, tool, append(args, cheapPBKDF("pbkdf2")...)...)
			after, _ := os.ReadFile(img)
			if before, _ := os.ReadFile(c.img); string(after) != string(before) {
				t.Errorf("%v: tool %d changed the image", c.args, i)
			}
		}
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", c.args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
	}
}
