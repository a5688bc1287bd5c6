package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// Encryption in place (reencrypt --encrypt --reduce-device-size) across
// tools: one starts it and is killed -9 part-way, the other finishes it
// (each on its own copy), and the volume then decrypts to the plain data.

const encReduce = 8 << 20

// plainImage writes a size-byte image of random data and returns it and
// the data an encryption with encReduce keeps.
func plainImage(w *workspace, name string, size int64) (string, []byte) {
	w.t.Helper()
	img := w.path(name)
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(img, data, 0o600); err != nil {
		w.t.Fatal(err)
	}
	return img, data[:size-encReduce]
}

// checkEncrypted fails unless img is a LUKS2 volume out of reencryption
// whose data decrypts to want.
func (w *workspace) checkEncrypted(img, key string, want []byte) {
	w.t.Helper()
	got, _ := w.segmentData(img, img, key, int64(len(want)))
	if i := firstDiff(got, want); i >= 0 {
		w.t.Fatalf("%s: data differs from byte %d", img, i)
	}
}

// encryptionState reads which kinds of data segments img has (linear:
// plaintext left; crypt: encrypted) and whether one is a hotzone.
func (w *workspace) encryptionState(img string) (linear, crypt, hot bool) {
	var meta struct {
		Segments map[string]struct {
			Type  string
			Flags []string
		}
	}
	dump := w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout
	if err := json.Unmarshal([]byte(dump), &meta); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range meta.Segments {
		if strings.Contains(strings.Join(s.Flags, " "), "backup-") {
			continue
		}
		linear = linear || s.Type == "linear"
		crypt = crypt || s.Type == "crypt"
		hot = hot || strings.Contains(strings.Join(s.Flags, " "), "in-reencryption")
	}
	return linear, crypt, hot
}

// midEncryption copies base (marked for encryption) to name and resumes it
// with tool, killed -9 after longer and longer delays until it stops with
// part of the data encrypted; it says whether a hotzone was left.
func midEncryption(w *workspace, base, name, tool string, flags []string) (string, bool) {
	w.t.Helper()
	img := w.path(name)
	delay := 5 * time.Millisecond
	for range 60 {
		copyFile(w.t, base, img)
		interrupt(w.t, delay, syscall.SIGKILL, tool, append([]string{"reencrypt", "--resume-only", img}, flags...)...)
		if r := w.cs(nil, "isLuks", img); r.code != 0 {
			w.t.Fatalf("killed after %v: no LUKS header left", delay)
		}
		linear, crypt, hot := w.encryptionState(img)
		if linear && crypt || hot {
			return img, hot
		}
		if !linear {
			delay = max(delay*2/3, time.Millisecond)
		} else {
			delay = delay * 3 / 2
		}
	}
	w.t.Fatal("no kill left the encryption part-way")
	return "", false
}

func TestEncryptResumesAcrossTools(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	tools := map[string]string{"luksd": ld, "cryptsetup": w.cryptsetup}
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt"}
	init := append([]string{"--encrypt", "--init-only", "--reduce-device-size", fmt.Sprint(encReduce)},
		append(flags, cheapPBKDF("pbkdf2")...)...)
	for _, c := range []struct {
		name string
		init []string
	}{
		{"xts", nil},
		{"cbc-essiv-4096", []string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--sector-size", "4096"}},
	} {
		for _, first := range []string{"luksd", "cryptsetup"} {
			t.Run(c.name+"-"+first, func(t *testing.T) {
				w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
				base, plain := plainImage(w, first+"-base.img", 64<<20)
				runTool(t, nil, tools[first], append(append([]string{"reencrypt", base}, init...), c.init...)...).ok(t)
				hots := 0
				for trial := range 2 {
					mid, hot := midEncryption(w, base, first+"-mid.img", tools[first], flags)
					if hot {
						hots++
					}
					for _, second := range []string{"luksd", "cryptsetup"} {
						img := w.path(fmt.Sprintf("%s-%d-%s.img", first, trial, second))
						copyFile(t, mid, img)
						resume := append([]string{"reencrypt", "--resume-only", img}, flags...)
						var r result
						if second == "cryptsetup" {
							r = w.csResume(key, "", img, resume...)
						} else {
							r = runTool(t, nil, tools[second], resume...)
						}
						if r.code != 0 {
							t.Fatalf("%s after %s (hotzone %v): exit %d: %s", second, first, hot, r.code, r.stderr)
						}
						w.checkEncrypted(img, key, plain)
						os.Remove(img)
					}
				}
				t.Logf("%d of 2 kills left a hotzone", hots)
			})
		}
	}
}

// luksd's encryption, whole, reads back through cryptsetup's key; and
// what cryptsetup refuses, luksd refuses with its words and exit code,
// each on its own copy, the image unchanged.
func TestEncryptRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	plainImg, _ := plainImage(w, "plain.img", 24<<20)
	luks, _ := w.formatted("pbkdf2")
	for _, c := range []struct {
		img  string
		args []string
	}{
		{plainImg, []string{"--encrypt"}},
		{plainImg, []string{"--encrypt", "--reduce-device-size", "24M"}},
		{plainImg, []string{"--encrypt", "--reduce-device-size", "32M"}},
		{plainImg, []string{"--encrypt", "--reduce-device-size", "8196k"}},
		{plainImg, []string{"--encrypt", "--resume-only", "--reduce-device-size", "8M"}},
		{luks, []string{"--encrypt", "--reduce-device-size", "8M"}},
		{luks, []string{"--decrypt"}},
	} {
		var res [2]result
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			img := w.path("copy.img")
			copyFile(t, c.img, img)
			res[i] = runTool(t, nil, tool, append(append([]string{"reencrypt", "--force-offline-reencrypt", "-q", "-d", key, img}, c.args...), cheapPBKDF("pbkdf2")...)...)
			after, _ := os.ReadFile(img)
			if before, _ := os.ReadFile(c.img); i == 1 && !bytes.Equal(after, before) {
				t.Errorf("%v: luksd changed the image", c.args)
			}
		}
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", c.args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
	}
}

// A volume killed part-way through its encryption (datashift, by either
// tool) is served as cryptsetup's activation maps it: the plaintext still
// to encrypt as linear segments (the first part from its moved copy), the
// rest encrypted; every byte read is the plain data, and data written
// through it is there after cryptsetup finishes the encryption.
func TestOpenMidEncryption(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	key := w.key("key", "pw")
	tools := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt"}
	for _, first := range []string{"luksd", "cryptsetup"} {
		t.Run(first, func(t *testing.T) {
			w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
			base, plain := plainImage(w, "base.img", 64<<20)
			runTool(t, nil, tools[first], append([]string{"reencrypt", base, "--encrypt", "--init-only",
				"--reduce-device-size", fmt.Sprint(encReduce)}, append(flags, cheapPBKDF("pbkdf2")...)...)...).ok(t)
			mid, hot := midEncryption(w, base, "mid.img", tools[first], flags)
			t.Logf("killed with a hotzone: %v", hot)
			got := serveRead(t, w, mid, key)
			if i := firstDiff(got, plain); i >= 0 {
				t.Fatalf("luksd reads the volume in encryption wrong from byte %d of %d", i, len(got))
			}
			want := serveWrite(t, w, mid, key, plain)
			w.finishWithCryptsetup(mid, key)
			w.checkEncrypted(mid, key, want)
		})
	}
}
