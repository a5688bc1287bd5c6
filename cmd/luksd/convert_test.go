package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// convertSeed makes a seed image for a convert case: a 20 MiB image
// formatted by tool ("cryptsetup" or "luksd") with args, then edited by the
// steps (cryptsetup lines, IMG standing for the image, K the key file).
type convertSeed struct {
	tool   string
	format []string
	steps  [][]string
}

// convertCases are the layouts and refusals convert is compared on: the
// same seed, converted by cryptsetup and by luksd on copies of their own.
var convertCases = []struct {
	name string
	seed convertSeed
	to   string
}{
	{"luks1 default", convertSeed{"cryptsetup", luks1Forced(), nil}, "luks2"},
	{"luks1 aes-cbc-essiv 256 sha1", convertSeed{"cryptsetup", luks1Forced("-c", "aes-cbc-essiv:sha256", "-s", "256", "-h", "sha1"), nil}, "luks2"},
	{"luks1 aes-xts 256 sha512, keyslots 0 2 5", convertSeed{"cryptsetup", luks1Forced("-s", "256", "-h", "sha512"), [][]string{
		{"luksAddKey", "-q", "--pbkdf-force-iterations", "1000", "-d", "K", "-S", "2", "IMG", "K"},
		{"luksAddKey", "-q", "--pbkdf-force-iterations", "1000", "-d", "K", "-S", "5", "IMG", "K"},
	}}, "luks2"},
	{"luks1 made by luksd, slot 7", convertSeed{"luksd", luks1Forced("-S", "7"), nil}, "luks2"},
	{"luks1 payload right after the keyslots", convertSeed{"cryptsetup", luks1Forced("-s", "256", "--align-payload", "8"), nil}, "luks2"},
	{"luks1 already luks1", convertSeed{"cryptsetup", luks1Forced(), nil}, "luks1"},
	{"luks1 to luks", convertSeed{"cryptsetup", luks1Forced(), nil}, "luks"},
	{"luks1 to plain", convertSeed{"cryptsetup", luks1Forced(), nil}, "plain"},
	{"luks2 pbkdf2 512", convertSeed{"cryptsetup", luks2PBKDF2(), nil}, "luks1"},
	{"luks2 pbkdf2 keyslots 0 3 6", convertSeed{"cryptsetup", luks2PBKDF2("-s", "256"), [][]string{
		{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", "K", "-S", "3", "IMG", "K"},
		{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", "K", "-S", "6", "IMG", "K"},
	}}, "luks1"},
	{"luks2 made by luksd", convertSeed{"luksd", luks2PBKDF2("-c", "aes-cbc-essiv:sha256", "-s", "256"), nil}, "luks1"},
	{"luks2 64k metadata", convertSeed{"cryptsetup", luks2PBKDF2("--luks2-metadata-size", "64k"), nil}, "luks1"},
	{"luks2 already luks2", convertSeed{"cryptsetup", luks2PBKDF2(), nil}, "luks2"},
	{"luks2 argon2", convertSeed{"cryptsetup", append([]string{"luksFormat", "-q", "--type", "luks2", "--sector-size", "512"}, cheapPBKDF("argon2id")...), nil}, "luks1"},
	{"luks2 4096-byte sectors", convertSeed{"cryptsetup", luks2PBKDF2Sector("4096"), nil}, "luks1"},
	{"luks2 token", convertSeed{"cryptsetup", luks2PBKDF2(), [][]string{{"token", "add", "--key-description", "x", "IMG"}}}, "luks1"},
	{"luks2 keyslot 9", convertSeed{"cryptsetup", luks2PBKDF2("-S", "9"), nil}, "luks1"},
	{"luks2 unbound key", convertSeed{"cryptsetup", luks2PBKDF2(), [][]string{
		{"luksAddKey", "-q", "--unbound", "-s", "512", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", "K", "IMG", "K"},
	}}, "luks1"},
	{"luks2 keyslot with sha1 AF", convertSeed{"cryptsetup", luks2PBKDF2(), [][]string{
		{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "-h", "sha1", "--pbkdf-force-iterations", "1000", "-d", "K", "IMG", "K"},
	}}, "luks1"},
	{"luks2 reencryption in progress", convertSeed{"cryptsetup", luks2PBKDF2(), [][]string{
		{"reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", "K", "IMG"},
	}}, "luks1"},
}

// luks2PBKDF2 is luksFormat of a LUKS2 volume that LUKS1 can describe.
func luks2PBKDF2(extra ...string) []string { return luks2PBKDF2Sector("512", extra...) }

func luks2PBKDF2Sector(sector string, extra ...string) []string {
	return append(append([]string{"luksFormat", "-q", "--type", "luks2", "--sector-size", sector}, cheapPBKDF("pbkdf2")...), extra...)
}

// make formats and edits the seed image img with key file key.
func (s convertSeed) make(w *workspace, img, key string) {
	w.t.Helper()
	run := w.cs
	if s.tool == "luksd" {
		run = w.luksd
	}
	run(nil, append(s.format, img, key)...).ok(w.t)
	for _, step := range s.steps {
		a := make([]string, len(step))
		for i, x := range step {
			a[i] = strings.ReplaceAll(x, "IMG", img)
			if x == "K" {
				a[i] = key
			}
		}
		w.cs(nil, a...).ok(w.t)
	}
}

// sameConversion checks that the two converted images hold the same bytes
// (LUKS2: but for the binary headers' random salts and their checksums).
func sameConversion(t *testing.T, what string, csImg, ldImg []byte) {
	t.Helper()
	if len(csImg) != len(ldImg) {
		t.Fatalf("%s: image sizes %d (cryptsetup) and %d (luksd)", what, len(csImg), len(ldImg))
	}
	if string(csImg[:6]) == "LUKS\xba\xbe" && csImg[7] == 2 {
		csImg, ldImg = maskSalts(csImg, 16<<10), maskSalts(ldImg, 16<<10)
	}
	if i := firstDiff(csImg, ldImg); i >= 0 {
		t.Errorf("%s: converted images differ first at byte %d", what, i)
	}
}

// TestConvertLikeCryptsetup: convert of the same seed by cryptsetup 2.6.1
// and by luksd: the same exit code and messages, and the same bytes on
// disk (LUKS2: salts aside); the passphrase opens the result in both tools.
func TestConvertLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	key := w.key("key", "pw")
	for i, tc := range convertCases {
		seed := w.image("seed.img")
		tc.seed.make(w, seed, key)
		// -v on every other case: its status line is the same on every
		// layout, and each run costs two conversions and three opens.
		args := []string{"convert", "IMG", "--type", tc.to, "-q"}
		if i%2 == 1 {
			args = append(args, "-v")
		}
		cs, ld, csImg, ldImg := w.twinRun(seed, args...)
		os.Remove(seed)
		w.sameAs(fmt.Sprintf("%s: %v", tc.name, args), cs, ld)
		sameConversion(t, tc.name, csImg, ldImg)
		if cs.code != 0 || ld.code != 0 {
			continue
		}
		conv := w.path("converted.img")
		os.WriteFile(conv, ldImg, 0o600)
		w.cs(nil, "open", "--test-passphrase", "-d", key, conv).ok(t)
		w.luksd(nil, "open", "--test-passphrase", "-d", key, conv).ok(t)
		if got := w.luksd(nil, "isLuks", "--type", tc.to, conv); got.code != 0 {
			t.Errorf("%s: the result is no %s header", tc.name, tc.to)
		}
	}
}

// TestConvertDetachedHeaderLikeCryptsetup: a detached header file is
// converted as the device (--header), grown to the LUKS2 size, and back.
func TestConvertDetachedHeaderLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	data := w.image("data.img")
	hdr := w.path("hdr.img")
	w.cs(nil, append(luks1Forced("--header", hdr), data, key)...).ok(t)
	orig, _ := os.ReadFile(hdr)
	cs, ld, csImg, ldImg := w.twinRun(hdr, "convert", data, "--header", "IMG", "--type", "luks2", "-q")
	w.sameAs("detached LUKS1 to LUKS2", cs, ld)
	sameConversion(t, "detached LUKS1 to LUKS2", csImg, ldImg)
	if len(ldImg) <= len(orig) {
		t.Errorf("the header file was not grown: %d bytes, was %d", len(ldImg), len(orig))
	}
	os.WriteFile(hdr, ldImg, 0o600)
	w.luksd(nil, "open", "--test-passphrase", "-d", key, "--header", hdr, data).ok(t)
	cs, ld, csImg, ldImg = w.twinRun(hdr, "convert", "IMG", "--type", "luks1", "-q")
	w.sameAs("detached LUKS2 to LUKS1", cs, ld)
	sameConversion(t, "detached LUKS2 to LUKS1", csImg, ldImg)
	// There and back: the LUKS1 header as it was.
	if !bytes.Equal(ldImg[:len(orig)], orig) {
		t.Errorf("LUKS1 -> LUKS2 -> LUKS1 changed the header (first difference at %d)", firstDiff(orig, ldImg))
	}
}

// TestConvertPeerImagesLikeCryptsetup: cryptsetup's own LUKS1 test images
// convert as cryptsetup converts them, and their passphrase (key file)
// still opens them; those whose cipher neither tool can use for LUKS2
// (LRW, ESSIV with whirlpool) are refused in cryptsetup's words.
func TestConvertPeerImagesLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	corpus := testtool.PeerCorpus(t)
	tar := testtool.Need(t, "tar")
	testtool.Need(t, "xz")
	if out, err := exec.Command(tar, "-xJf", filepath.Join(corpus, "luks1-images.tar.xz"), "-C", w.dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	imgs, _ := filepath.Glob(filepath.Join(w.dir, "luks1-images", "luks1_aes-*.img"))
	if len(imgs) < 6 {
		t.Fatalf("found %d aes images in the corpus", len(imgs))
	}
	keyFile := filepath.Join(w.dir, "luks1-images", "keyfile1")
	for _, img := range imgs {
		name := filepath.Base(img)
		cs, ld, csImg, ldImg := w.twinRun(img, "convert", "IMG", "--type", "luks2", "-q")
		w.sameAs(name, cs, ld)
		sameConversion(t, name, csImg, ldImg)
		if ld.code != 0 {
			continue
		}
		conv := w.path("converted.img")
		os.WriteFile(conv, ldImg, 0o600)
		w.luksd(nil, "open", "--test-passphrase", "-d", keyFile, conv).ok(t)
		w.cs(nil, "open", "--test-passphrase", "-d", keyFile, conv).ok(t)
	}
	// luksd runs serpent and twofish itself: it converts them where
	// cryptsetup needs the kernel's (not loaded on every host).
	img := filepath.Join(w.dir, "luks1-images", "luks1_serpent-xts-plain64-sha256.img")
	w.luksd(nil, "convert", img, "--type", "luks2", "-q").ok(t)
	w.luksd(nil, "open", "--test-passphrase", "-d", keyFile, img).ok(t)
}

// TestConvertRefusalsLikeCryptsetup: what is not a LUKS header, a LUKS1
// header followed by luksmeta's metadata, and a missing argument are
// refused as cryptsetup refuses them, the image untouched.
func TestConvertRefusalsLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	key := w.key("key", "pw")
	empty := w.image("empty.img")
	for _, args := range [][]string{
		{"convert", "IMG", "--type", "luks2", "-q"},
		{"convert", "IMG", "--type", "luks1", "-q", "-v"},
		{"convert", "IMG", "-q"},
		{"convert", "--type", "luks2", "-q"},
		{"convert", "IMG", "--type", "luks2", "--key-size", "256"},
		{"convert", "IMG", "--type", "luks2", "--pbkdf", "pbkdf2"},
		{"convert", "IMG", "--type", "luks2", "--test-args"},
		{"convert", "IMG", "--header", "/nonexistent", "--type", "luks2"},
	} {
		cs, ld, csImg, ldImg := w.twinRun(empty, args...)
		// A usage error: cryptsetup prints its usage and "cryptsetup: MSG".
		_, csMsg, usage := strings.Cut(lastLine(cs.stderr), filepath.Base(w.cryptsetup)+": ")
		if !usage {
			w.sameAs(fmt.Sprint(args), cs, ld)
		} else if ld.code != cs.code || strings.TrimSpace(ld.stderr) != csMsg {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", args, cs.code, csMsg, ld.code, ld.stderr)
		}
		sameConversion(t, fmt.Sprint(args), csImg, ldImg)
	}
	meta := w.image("luksmeta.img")
	w.cs(nil, append(luks1Forced(), meta, key)...).ok(t)
	f, _ := os.OpenFile(meta, os.O_RDWR, 0)
	// The default layout's keyslots end at 2068480 bytes (4 KiB aligned).
	f.WriteAt([]byte("LUKSMETA"), 2068480)
	f.Close()
	orig, _ := os.ReadFile(meta)
	cs, ld, csImg, ldImg := w.twinRun(meta, "convert", "IMG", "--type", "luks2", "-q")
	w.sameAs("luksmeta", cs, ld)
	if ld.code == 0 || !bytes.Equal(ldImg, orig) || !bytes.Equal(csImg, orig) {
		t.Errorf("a LUKS1 header with luksmeta data was converted or changed (luksd exit %d)", ld.code)
	}
}

// TestConvertAsksLikeCryptsetup: on a terminal, without -q, convert asks
// as cryptsetup does; anything but YES leaves the device as it was (exit
// 2), YES converts it. Screens are compared with cryptsetup's.
func TestConvertAsksLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	seed := w.image("seed.img")
	w.cs(nil, append(luks1Forced(), seed, key)...).ok(t)
	orig, _ := os.ReadFile(seed)
	for _, answer := range []string{"no", "YES"} {
		var screens [2]string
		var codes [2]int
		var imgs [2][]byte
		for i, prog := range []string{w.cryptsetup, testtool.Luksd(t)} {
			img := w.path(fmt.Sprintf("ask-%d.img", i))
			os.WriteFile(img, orig, 0o600)
			s := startProgOnTTY(t, prog, "convert", img, "--type", "luks2")
			s.answer(sureSuffix, 1, answer)
			codes[i], screens[i] = s.wait()
			screens[i] = strings.ReplaceAll(screens[i], img, "IMG")
			imgs[i], _ = os.ReadFile(img)
		}
		if codes[0] != codes[1] || screens[0] != screens[1] {
			t.Errorf("answer %s: cryptsetup exit %d %q, luksd exit %d %q", answer, codes[0], screens[0], codes[1], screens[1])
		}
		sameConversion(t, "answer "+answer, imgs[0], imgs[1])
		if answer == "no" && !bytes.Equal(imgs[1], orig) {
			t.Error("a declined conversion changed the image")
		}
	}
}
