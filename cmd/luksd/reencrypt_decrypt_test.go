package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// Decryption in place (reencrypt --decrypt --header NEWFILE) across
// tools: one exports the header and starts, is killed -9 part-way, the
// other finishes (each on its own copy of the data and header); then
// the data device holds the plaintext at offset 0.

// checkDecrypted fails unless hdr is a finished decryption's header and
// img starts with want.
func (w *workspace) checkDecrypted(img, hdr string, want []byte) {
	w.t.Helper()
	var meta struct {
		Segments map[string]struct{ Type, Offset, Size string }
		Keyslots map[string]any
		Config   struct{ Requirements any }
	}
	dump := w.cs(nil, "luksDump", "--dump-json-metadata", hdr).ok(w.t).stdout
	if err := json.Unmarshal([]byte(dump), &meta); err != nil {
		w.t.Fatal(err)
	}
	seg := meta.Segments["0"]
	if len(meta.Segments) != 1 || seg.Type != "linear" || seg.Offset != "0" || seg.Size != "dynamic" ||
		len(meta.Keyslots) != 0 || meta.Config.Requirements != nil {
		w.t.Fatalf("%s: not a finished decryption: %s", hdr, dump)
	}
	got, err := os.ReadFile(img)
	if err != nil {
		w.t.Fatal(err)
	}
	if i := firstDiff(got[:len(want)], want); i >= 0 {
		w.t.Fatalf("%s: data differs from byte %d", img, i)
	}
}

// midDecryption copies base and its header (marked for decryption) to
// name and resumes it with tool, killed -9 after longer and longer delays
// until it stops part-way; it says whether a hotzone was left.
func midDecryption(w *workspace, base, baseHdr, name, tool string, flags []string) (string, string, bool) {
	w.t.Helper()
	img, hdr := w.path(name), w.path(name+".hdr")
	delay := 5 * time.Millisecond
	for try := range 60 {
		copyFile(w.t, base, img)
		copyFile(w.t, baseHdr, hdr)
		interrupt(w.t, delay, syscall.SIGKILL, tool, append([]string{"reencrypt", "--resume-only", "--header", hdr, img}, flags...)...)
		linear, crypt, hot := w.encryptionState(hdr)
		if linear && crypt || hot {
			w.t.Logf("part-way after %d kills", try+1)
			return img, hdr, hot
		}
		if linear {
			delay = max(delay*2/3, time.Millisecond)
		} else {
			delay = delay * 3 / 2
		}
	}
	w.t.Fatal("no kill left the decryption part-way")
	return "", "", false
}

func TestDecryptResumesAcrossTools(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	tools := map[string]string{"luksd": ld, "cryptsetup": w.cryptsetup}
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt"}
	// Each case starts with one tool and is finished by both: between them
	// each tool's start is resumed by the other (the two cases halve the
	// package's time against every case with every tool first).
	for _, c := range []struct {
		rc    reencCase
		init  []string
		first string
	}{
		{reencCases[0], nil, "luksd"},
		{reencCases[1], []string{"--resilience", "journal", "--hotzone-size", "4M"}, "cryptsetup"},
	} {
		{
			first := c.first
			t.Run(c.rc.name+"-"+first, func(t *testing.T) {
				w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
				name := c.rc.name + "-" + first
				orig, plain := reencImage(w, name+"-orig.img", c.rc, key, 96<<20)
				base, baseHdr := w.path(name+"-base.img"), w.path(name+"-base.hdr")
				copyFile(t, orig, base)
				runTool(t, nil, tools[first], append(append([]string{"reencrypt", "--decrypt", "--init-only",
					"--header", baseHdr, base}, flags...), c.init...)...).ok(t)
				hots := 0
				for trial := range 1 {
					mid, midHdr, hot := midDecryption(w, base, baseHdr, name+"-mid.img", tools[first], flags)
					if hot {
						hots++
					}
					for _, second := range []string{"luksd", "cryptsetup"} {
						img := w.path(fmt.Sprintf("%s-%d-%s.img", name, trial, second))
						hdr := img + ".hdr"
						copyFile(t, mid, img)
						copyFile(t, midHdr, hdr)
						resume := append([]string{"reencrypt", "--resume-only", "--header", hdr, img}, flags...)
						var r result
						if second == "cryptsetup" {
							r = w.csResume(key, hdr, img, resume...)
						} else {
							r = runTool(t, nil, tools[second], resume...)
						}
						if r.code != 0 {
							t.Fatalf("%s after %s (hotzone %v): exit %d: %s", second, first, hot, r.code, r.stderr)
						}
						w.checkDecrypted(img, hdr, plain)
						os.Remove(img)
					}
				}
				// And each finishes its own start at once.
				img, hdr := w.path(name+"-whole.img"), w.path(name+"-whole.hdr")
				copyFile(t, orig, img)
				runTool(t, nil, tools[first], append(append([]string{"reencrypt", "--decrypt", "--header", hdr, img}, flags...), c.init...)...).ok(t)
				w.checkDecrypted(img, hdr, plain)
				t.Logf("%d of 1 kill left a hotzone", hots)
			})
		}
	}
}

// What cryptsetup refuses when a decryption starts, luksd refuses with
// its words and exit code, the image unchanged and no header file left.
func TestDecryptRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, bad := w.key("key", "pw"), w.key("bad", "nope")
	base, _ := reencImage(w, "base.img", reencCases[0], key, 40<<20)
	ld := testtool.Luksd(t)
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for i, args := range [][]string{
		{"-d", key, "--decrypt"},
		{"-d", key, "--decrypt", "--header", "HDR", "--resilience", "none"},
		{"-d", key, "--decrypt", "--header", "HDR", "--resilience", "datashift"},
		{"-d", key, "--decrypt", "--header", "HDR", "--resilience", "foo"},
		{"-d", bad, "--decrypt", "--header", "HDR"},
		{"-d", key, "--decrypt", "--header", "HDR", "--hotzone-size", "32M"},
		{"-d", key, "--decrypt", "--header", "HDR", "--hotzone-size", "1000"},
		{"-d", key, "--decrypt", "--header", w.path("none/HDR")},
	} {
		var rs [2]result
		for j, tool := range []string{w.cryptsetup, ld} {
			img, hdr := w.path(fmt.Sprintf("%d-%d.img", i, j)), w.path(fmt.Sprintf("%d-%d.hdr", i, j))
			copyFile(t, base, img)
			a := append([]string{"reencrypt", "-q", "--force-offline-reencrypt", img}, args...)
			for k := range a {
				if a[k] == "HDR" {
					a[k] = hdr
				}
			}
			rs[j] = runTool(t, nil, tool, a...)
			if got, _ := os.ReadFile(img); firstDiff(got, orig) >= 0 {
				t.Fatalf("%v: %s changed the image", args, tool)
			}
			if _, err := os.Stat(hdr); err == nil {
				t.Fatalf("%v: %s left a header file", args, tool)
			}
		}
		if rs[0].code != rs[1].code || rs[0].stderr != rs[1].stderr {
			t.Errorf("%v:\ncryptsetup exit %d: %q\nluksd      exit %d: %q", args, rs[0].code, rs[0].stderr, rs[1].code, rs[1].stderr)
		}
	}
}
