package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Decryption in place of a detached-header volume (reencrypt --decrypt
// --header HDR, no data move) across tools: one starts it and is killed -9
// at a fixed point, the other finishes it; the data is then the plaintext
// at offset 0 and HDR is left as cryptsetup leaves it.

func TestDecryptDetachedResumesAcrossTools(t *testing.T) {
	strace := testtool.Need(t, "strace") // kills a run at a fixed point
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	cipher := make([]byte, 4<<20)
	rand.Read(cipher)
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt", "--hotzone-size", "1M"}
	for _, c := range []struct {
		first, second string
		sync          string // the first tool is killed entering its second hotzone's data sync
		n             int
	}{
		{w.cryptsetup, ld, "fdatasync", 2},
		{ld, w.cryptsetup, "fsync", 14},
	} {
		img, hdr := w.path("data.img"), w.path("data.hdr")
		os.Remove(hdr)
		if err := os.WriteFile(img, cipher, 0o600); err != nil {
			t.Fatal(err)
		}
		w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", hdr, img}, cheapPBKDF("pbkdf2")...)...).ok(t)
		plain := w.detachedPlain(img, hdr, key, -1)
		init := append([]string{"reencrypt", "--decrypt", "--init-only", "--header", hdr, img}, flags...)
		runTool(t, nil, c.first, init...).ok(t)
		resume := append([]string{"reencrypt", "--resume-only", "--header", hdr, img}, flags...)
		killedAt(t, strace, c.sync, c.n, c.first, resume...)
		// Part-way: a hotzone left as a rule (luksd's sync count can
		// shift by one with its goroutines), else between two hotzones.
		mid := w.cs(nil, "luksDump", "--dump-json-metadata", hdr).ok(t).stdout
		if !strings.Contains(mid, "online-reencrypt") || !strings.Contains(mid, `"type":"linear"`) {
			t.Fatalf("%s killed at %s #%d is not part-way: %s", c.first, c.sync, c.n, mid)
		}
		var r result
		if c.second == w.cryptsetup {
			r = w.csResume(key, hdr, img, resume...)
		} else {
			r = runTool(t, nil, c.second, resume...)
		}
		if r.code != 0 {
			t.Fatalf("%s after %s: exit %d: %s", c.second, c.first, r.code, r.stderr)
		}
		got, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(got, plain); i >= 0 {
			t.Fatalf("%s after %s: data differs from the plaintext at %d", c.second, c.first, i)
		}
		var meta struct {
			Keyslots, Digests map[string]any
			Segments          map[string]struct{ Type, Offset, Size string }
		}
		dump := w.cs(nil, "luksDump", "--dump-json-metadata", hdr).ok(t).stdout
		if err := json.Unmarshal([]byte(dump), &meta); err != nil {
			t.Fatal(err)
		}
		if s := meta.Segments["0"]; len(meta.Keyslots)+len(meta.Digests) != 0 || len(meta.Segments) != 1 ||
			s.Type != "linear" || s.Offset != "0" || s.Size != "dynamic" {
			t.Fatalf("%s after %s: header left %s", c.second, c.first, dump)
		}
	}
}

// What cryptsetup refuses for --decrypt of a detached-header volume,
// luksd refuses with its words and exit code, header and data unchanged.
func TestDecryptDetachedRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, wrong := w.key("key", "pw"), w.key("wrong", "nope")
	img, hdr := w.path("data.img"), w.path("data.hdr")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", hdr, img}, cheapPBKDF("pbkdf2")...)...).ok(t)
	for _, args := range [][]string{
		{"-d", wrong},
		{"-d", key, "--resilience", "datashift"},
		{"-d", key, "--resilience", "foo"},
	} {
		var res [2]result
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			cimg, chdr := w.path("copy.img"), w.path("copy.hdr")
			copyFile(t, img, cimg)
			copyFile(t, hdr, chdr)
			res[i] = runTool(t, nil, tool, append([]string{"reencrypt", "--decrypt", "--force-offline-reencrypt", "-q",
				"--header", chdr, cimg}, args...)...)
			for _, f := range [][2]string{{img, cimg}, {hdr, chdr}} {
				before, _ := os.ReadFile(f[0])
				if after, _ := os.ReadFile(f[1]); string(after) != string(before) {
					t.Errorf("%v: tool %d changed %s", args, i, f[1])
				}
			}
		}
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
	}
}

// --decrypt with an existing --header that is not a detached header with
// its data at offset 0 (a luksHeaderBackup of the device, the device
// itself, by its name or another) is refused as cryptsetup refuses it,
// and so is --resume-only of a volume not in reencryption: same words and
// exit code, nothing written to the device or the header, no file made.
func TestDecryptHeaderNotDetachedRefused(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	backup := w.path("backup.hdr")
	w.cs(nil, "luksHeaderBackup", img, "--header-backup-file", backup).ok(t)
	plain, det := w.image("plain.img"), w.path("det.hdr")
	w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", det, plain}, cheapPBKDF("pbkdf2")...)...).ok(t)
	const notDetached = "LUKS2 decryption is supported with detached header device only (with data offset set to 0).\n"
	const notInProgress = "Device reencryption not in progress.\n"
	refusedAlike(t, w, []refusal{
		{name: "backup", files: []string{img, backup}, want: notDetached, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--header", p[1], p[0]}
		}},
		{name: "itself", files: []string{img}, want: notDetached, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--header", p[0], p[0]}
		}},
		{name: "hard link", files: []string{img}, want: notDetached, args: func(dir string, p []string) []string {
			link := filepath.Join(dir, "link.hdr")
			if err := os.Link(p[0], link); err != nil {
				t.Fatal(err)
			}
			return []string{"-d", key, "--decrypt", "--header", link, p[0]}
		}},
		{name: "offset 0 on itself", files: []string{det}, want: notDetached, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--header", p[0], p[0]}
		}},
		{name: "backup, resume-only", files: []string{img, backup}, want: notInProgress, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--resume-only", "--header", p[1], p[0]}
		}},
		{name: "detached, decrypt resume-only", files: []string{plain, det}, want: notInProgress, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--resume-only", "--header", p[1], p[0]}
		}},
		{name: "new file, decrypt resume-only", files: []string{img}, want: notInProgress, args: func(dir string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--resume-only", "--header", filepath.Join(dir, "new.hdr"), p[0]}
		}},
	})
}
