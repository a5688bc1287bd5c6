package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Damaged and unusual headers, each command run by cryptsetup and by luksd
// on copies of their own (cryptsetup repairs what it loads).

// twinRun runs args (IMG standing for the image) through cryptsetup on a
// copy of img and through luksd on another, and returns both results and
// the copies as each tool left them.
func (w *workspace) twinRun(img string, args ...string) (cs, ld result, csImg, ldImg []byte) {
	w.t.Helper()
	data, err := os.ReadFile(img)
	if err != nil {
		w.t.Fatal(err)
	}
	run := func(tool string) (result, []byte) {
		p := w.path("twin-" + tool + ".img")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			w.t.Fatal(err)
		}
		a := make([]string, len(args))
		for i, x := range args {
			a[i] = strings.ReplaceAll(x, "IMG", p)
		}
		var r result
		if tool == "cryptsetup" {
			r = w.cs(nil, a...)
		} else {
			r = w.luksd(nil, a...)
		}
		after, err := os.ReadFile(p)
		if err != nil {
			w.t.Fatal(err)
		}
		os.Remove(p)
		r.stdout = strings.ReplaceAll(r.stdout, p, "IMG")
		r.stderr = strings.ReplaceAll(r.stderr, p, "IMG")
		return r, after
	}
	cs, csImg = run("cryptsetup")
	ld, ldImg = run("luksd")
	return cs, ld, csImg, ldImg
}

// sameAs fails unless luksd's run matches cryptsetup's: exit code, every
// line of stderr (paths as IMG), and stdout when the command succeeded.
func (w *workspace) sameAs(what string, cs, ld result) {
	w.t.Helper()
	if ld.code != cs.code || ld.stderr != cs.stderr || cs.code == 0 && ld.stdout != cs.stdout {
		w.t.Errorf("%s:\n--- cryptsetup exit %d\n%s%s--- luksd exit %d\n%s%s", what, cs.code, cs.stderr, cs.stdout, ld.code, ld.stderr, ld.stdout)
	}
}

// maskSalts clears what differs between two repairs of one header: the
// salt and checksum of both binary headers (hdrSize the copy size).
func maskSalts(img []byte, hdrSize int) []byte {
	img = append([]byte(nil), img...)
	for _, off := range []int{0, hdrSize} {
		clear(img[off+104 : off+168])
		clear(img[off+448 : off+512])
	}
	return img
}

// mdaImages returns cryptsetup's test images with metadata areas of 16 KiB
// to 4 MiB, and their passphrase file.
func mdaImages(t *testing.T, w *workspace) ([]string, string) {
	t.Helper()
	corpus := testtool.PeerCorpus(t)
	tar := testtool.Need(t, "tar")
	testtool.Need(t, "xz")
	if out, err := exec.Command(tar, "-xJf", filepath.Join(corpus, "luks2_mda_images.tar.xz"), "-C", w.dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	var imgs []string
	filepath.Walk(w.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), "test_image_") {
			imgs = append(imgs, p)
		}
		return nil
	})
	if len(imgs) < 9 {
		t.Fatalf("found %d mda images, want one per metadata size", len(imgs))
	}
	return imgs, w.key("mda-pass", "Qx3qn46vq0v")
}

// TestDamagedPrimaryLikeCryptsetup: with the first 4 KiB of a LUKS2 image
// zeroed or random, cryptsetup reads the volume through its secondary copy
// (at every standard offset) and rewrites the primary from it; so must
// luksd, with the same output, repairing the same bytes.
func TestDamagedPrimaryLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	imgs, pass := mdaImages(t, w)
	for i, img := range imgs {
		orig, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		hdrSize := int(binary.BigEndian.Uint64(orig[8:16]))
		// One kind of damage per image, taking turns: every metadata
		// size is still damaged, and each kind meets several sizes.
		for _, damage := range []string{[]string{"zeros", "random"}[i%2]} {
			dmg := append([]byte(nil), orig...)
			clear(dmg[:4096])
			if damage == "random" {
				rand.Read(dmg[:4096])
			}
			damaged := w.path("damaged.img")
			if err := os.WriteFile(damaged, dmg, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"luksDump", "IMG"},
				{"isLuks", "IMG"},
				{"luksUUID", "IMG"},
				{"open", "--test-passphrase", "-d", pass, "IMG"},
				{"luksDump", "--dump-json-metadata", "IMG"},
			} {
				what := fmt.Sprintf("%s, %s primary: %v", filepath.Base(img), damage, args)
				cs, ld, csImg, ldImg := w.twinRun(damaged, args...)
				w.sameAs(what, cs, ld)
				if !bytes.Equal(maskSalts(ldImg, hdrSize), maskSalts(csImg, hdrSize)) || bytes.Equal(ldImg, dmg) {
					t.Errorf("%s: luksd did not repair the primary as cryptsetup did", what)
				}
			}
			// Without locks cryptsetup reads through the secondary and
			// repairs nothing; so does luksd.
			cs, ld, csImg, ldImg := w.twinRun(damaged, "luksDump", "--disable-locks", "IMG")
			w.sameAs(filepath.Base(img)+" luksDump --disable-locks", cs, ld)
			if !bytes.Equal(csImg, dmg) || !bytes.Equal(ldImg, dmg) {
				t.Errorf("%s: a header was repaired with --disable-locks", filepath.Base(img))
			}
			// An edit through the secondary: both tools' results open.
			added := w.key("added", "added passphrase")
			cs, ld, csImg, ldImg = w.twinRun(damaged, append(append([]string{"luksAddKey", "-q"}, cheapPBKDF("pbkdf2")...), "-d", pass, "IMG", added)...)
			w.sameAs(filepath.Base(img)+" luksAddKey", cs, ld)
			for tool, after := range map[string][]byte{"cryptsetup": csImg, "luksd": ldImg} {
				p := w.path("after.img")
				os.WriteFile(p, after, 0o600)
				if !w.opens(p, added) || !w.opens(p, pass) {
					t.Errorf("%s: after %s's luksAddKey a passphrase does not open", filepath.Base(img), tool)
				}
			}
		}
	}
}

// rewriteJSON replaces the JSON metadata of both header copies of img by
// edit(the compact JSON), checksums recomputed (sha256).
func rewriteJSON(t *testing.T, img string, edit func(js string) string) {
	t.Helper()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	hdr := int(binary.BigEndian.Uint64(b[8:16]))
	js := edit(strings.TrimRight(string(b[4096:hdr]), "\x00"))
	for _, off := range []int{0, hdr} {
		area := b[off+4096 : off+hdr]
		clear(area)
		copy(area, js)
		clear(b[off+448 : off+512])
		sum := sha256.New()
		sum.Write(b[off : off+4096])
		sum.Write(area)
		copy(b[off+448:], sum.Sum(nil))
	}
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTruncatedLikeCryptsetup: an image cut short of its header area gets
// cryptsetup's "Device X is too small. Need at least N bytes." and the
// message each verb adds, before anything else happens.
func TestTruncatedLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("cut.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	if err := os.Truncate(img, 1<<20); err != nil {
		t.Fatal(err)
	}
	tok := w.key("tok.json", `{"type":"x","keyslots":[]}`)
	for _, args := range [][]string{
		{"luksDump", "IMG"}, {"isLuks", "IMG"}, {"isLuks", "-v", "IMG"}, {"luksUUID", "IMG"},
		{"open", "--test-passphrase", "-d", key, "IMG"},
		{"luksAddKey", "-q", "-d", key, "IMG", key},
		{"luksKillSlot", "-q", "IMG", "0"},
		{"luksHeaderBackup", "IMG", "--header-backup-file", w.path("cut.backup")},
		{"config", "--label", "x", "IMG"},
		{"token", "import", "--json-file", tok, "IMG"},
		{"luksConvertKey", "-d", key, "IMG"},
		{"erase", "-q", "IMG"},
	} {
		cs, ld, _, _ := w.twinRun(img, args...)
		w.sameAs(fmt.Sprint(args), cs, ld)
	}
}

// TestAmbiguousSignatureLikeCryptsetup: a filesystem made over the primary
// header is not overwritten by a repair; both tools refuse the device.
func TestAmbiguousSignatureLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	mkfs := testtool.Need(t, "mkfs.ext4")
	img, key := w.image("amb.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	fs := testtool.ImageAt(t, w.dir, "fs.img", 8<<20)
	if out, err := exec.Command(mkfs, "-q", "-F", fs).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	sb, _ := os.ReadFile(fs)
	b, _ := os.ReadFile(img)
	copy(b, sb[:4096])
	os.WriteFile(img, b, 0o600)
	for _, args := range [][]string{{"luksDump", "IMG"}, {"isLuks", "-v", "IMG"}, {"open", "--test-passphrase", "-d", key, "IMG"}} {
		cs, ld, csImg, ldImg := w.twinRun(img, args...)
		w.sameAs(fmt.Sprint(args), cs, ld)
		if !bytes.Equal(ldImg, b) || !bytes.Equal(csImg, b) {
			t.Errorf("%v: the filesystem's superblock was overwritten", args)
		}
	}
}

// requirementImages returns a cryptsetup-made volume in the middle of a
// reencryption (reencrypt --init-only: requirement online-reencrypt-v2,
// a reencrypt keyslot, backup segments) and one with a mandatory
// requirement cryptsetup does not know, and the passphrase file.
func requirementImages(t *testing.T, w *workspace) (reencrypting, unknown, key string) {
	t.Helper()
	key = w.key("key", "pw")
	reencrypting = w.image("reencrypting.img")
	w.cs(nil, append([]string{"luksFormat", "-q", reencrypting, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, "token", "add", "--key-description", "x", reencrypting).ok(t)
	unknown = w.path("unknown.img")
	b, _ := os.ReadFile(reencrypting)
	os.WriteFile(unknown, b, 0o600)
	w.cs(nil, append([]string{"reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, reencrypting}, cheapPBKDF("pbkdf2")...)...).ok(t)
	rewriteJSON(t, unknown, func(js string) string {
		return strings.Replace(js, `"config":{`, `"config":{"requirements":{"mandatory":["future-feature"]},`, 1)
	})
	return reencrypting, unknown, key
}

// TestRequirementsLikeCryptsetup: a volume in the middle of a cryptsetup
// reencryption, or with a mandatory requirement cryptsetup does not know,
// gets cryptsetup's words and exit code from every verb: the dump, the
// passphrase test and the keyslot removals work, the edits cryptsetup
// refuses are refused.
func TestRequirementsLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	reencrypting, unknown, key := requirementImages(t, w)
	tok := w.key("tok.json", `{"type":"x","keyslots":[]}`)
	plain := w.image("plain.img")
	w.cs(nil, append([]string{"luksFormat", "-q", plain, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	for name, img := range map[string]string{"reencryption": reencrypting, "unknown requirement": unknown} {
		for _, args := range [][]string{
			{"luksDump", "IMG"}, {"luksDump", "--dump-json-metadata", "IMG"}, {"isLuks", "IMG"}, {"luksUUID", "IMG"},
			{"open", "--test-passphrase", "-d", key, "IMG"},
			{"open", "--test-passphrase", "-S", "0", "-d", key, "IMG"},
			{"luksDump", "--dump-volume-key", "-q", "-d", key, "IMG"},
			{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", key, "IMG", key},
			{"luksConvertKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", key, "IMG"},
			{"luksUUID", "-q", "--uuid", "12345678-1234-1234-1234-123456789012", "IMG"},
			{"config", "--label", "x", "IMG"},
			{"config", "--priority", "prefer", "-S", "0", "IMG"},
			{"token", "add", "--key-description", "y", "IMG"},
			{"token", "import", "--json-file", tok, "IMG"},
			{"token", "remove", "--token-id", "0", "IMG"},
			{"luksHeaderBackup", "IMG", "--header-backup-file", "IMG.backup"},
			{"luksHeaderRestore", "-q", "IMG", "--header-backup-file", plain},
			{"luksChangeKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", key, "IMG", key},
			{"luksRemoveKey", "-q", "-d", key, "IMG"},
			{"luksKillSlot", "-q", "-d", key, "IMG", "1"},
			{"erase", "-q", "IMG"},
		} {
			cs, ld, _, _ := w.twinRun(img, args...)
			w.sameAs(name+": "+fmt.Sprint(args), cs, ld)
		}
	}
	// A backup with requirements: one cryptsetup can resume is restored,
	// an unknown one is forbidden.
	for _, img := range []string{reencrypting, unknown} {
		backup := img + ".backup"
		w.cs(nil, "luksHeaderBackup", img, "--header-backup-file", backup).ok(t)
		cs, ld, _, _ := w.twinRun(plain, "luksHeaderRestore", "-q", "IMG", "--header-backup-file", backup)
		w.sameAs("restore of "+filepath.Base(backup), cs, ld)
	}
	// luksd cannot map a volume whose requirements it does not know: it
	// says so and maps nothing (serve: the same check as open, with no
	// kernel device needed). One in reencryption it maps in segments
	// (TestOpenMidReencryption).
	r := w.luksd(nil, "serve", "--socket", w.path("req.sock"), "-d", key, unknown)
	if r.code != 1 || !strings.Contains(r.stderr, "Unmet LUKS2 requirements detected.") {
		t.Errorf("serve %s: exit %d: %s", unknown, r.code, r.stderr)
	}
}

// oddKeyslotCases are keyslot edits cryptsetup's load lets through.
var oddKeyslotCases = []struct {
	name string
	edit func(slot string) func(js string) string
}{
	{"0 iterations", replaceIn(`"iterations":1000`, `"iterations":0`)},
	{"unknown kdf", replaceIn(`"type":"pbkdf2"`, `"type":"scrypt"`)},
	{"priority 5", replaceIn(`"key_size":64,`, `"key_size":64,"priority":5,`)},
	{"key_size 4097", replaceIn(`"key_size":64,`, `"key_size":4097,`)},
	{"stripes 0", replaceIn(`"stripes":4000`, `"stripes":0`)},
	{"salt not base64", replaceSalt("!!")},
	{"salt of 8 bytes", replaceSalt("c2FsdHNhbHQ=")},
	{"unknown type", replaceIn(`"type":"luks2"`, `"type":"future"`)},
}

// replaceIn replaces old by new in keyslot slot's object of the JSON.
func replaceIn(old, new string) func(slot string) func(js string) string {
	return func(slot string) func(js string) string {
		return func(js string) string {
			start := strings.Index(js, `"`+slot+`":{"type"`)
			end := start + strings.Index(js[start:], `}}`)
			return js[:start] + strings.Replace(js[start:end], old, new, 1) + js[end:]
		}
	}
}

func replaceSalt(salt string) func(slot string) func(js string) string {
	return func(slot string) func(js string) string {
		return func(js string) string {
			start := strings.Index(js, `"`+slot+`":{"type"`)
			s := start + strings.Index(js[start:], `"salt":"`) + len(`"salt":"`)
			e := s + strings.Index(js[s:], `"`)
			return js[:s] + salt + js[e:]
		}
	}
}

// TestOddKeyslotsLikeCryptsetup: a keyslot cryptsetup's load tolerates but
// cannot use (0 iterations, an unknown KDF, priority 5, a bad salt, ...)
// does not make the volume unreadable; it is refused when tried, as
// cryptsetup refuses it, and the volume opens with the other keyslot.
func TestOddKeyslotsLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	k0, k1 := w.key("k0", "first"), w.key("k1", "second")
	base := w.image("odd.img")
	w.cs(nil, append([]string{"luksFormat", "-q", base, k0}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, append([]string{"luksAddKey", "-q", "-d", k0, base, k1}, cheapPBKDF("pbkdf2")...)...).ok(t)
	orig, _ := os.ReadFile(base)
	img := w.path("odd-case.img")
	for _, tc := range oddKeyslotCases {
		for _, slot := range []string{"0", "1"} {
			os.WriteFile(img, orig, 0o600)
			rewriteJSON(t, img, tc.edit(slot))
			for _, args := range [][]string{
				{"luksDump", "IMG"},
				{"open", "--test-passphrase", "-d", k0, "IMG"},
				{"open", "--test-passphrase", "-d", k1, "IMG"},
				{"open", "--test-passphrase", "-S", "1", "-d", k1, "IMG"},
				{"open", "--test-passphrase", "-S", "0", "-d", k0, "IMG"},
			} {
				cs, ld, _, _ := w.twinRun(img, args...)
				w.sameAs(fmt.Sprintf("keyslot %s with %s: %v", slot, tc.name, args), cs, ld)
			}
		}
	}
}

// TestLongLabelLikeCryptsetup: a label or subsystem filling its 48-byte
// field without a NUL reads cut at 47 bytes, as cryptsetup reads it.
func TestLongLabelLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("label.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	b, _ := os.ReadFile(img)
	for _, off := range []int{0, 16384} {
		copy(b[off+24:off+72], strings.Repeat("L", 48))   // label
		copy(b[off+208:off+256], strings.Repeat("S", 48)) // subsystem
		clear(b[off+448 : off+512])
		sum := sha256.New()
		sum.Write(b[off : off+4096])
		sum.Write(b[off+4096 : off+16384])
		copy(b[off+448:], sum.Sum(nil))
	}
	os.WriteFile(img, b, 0o600)
	cs, ld, _, _ := w.twinRun(img, "luksDump", "IMG")
	w.sameAs("luksDump", cs, ld)
	if !strings.Contains(ld.stdout, "Label:         \t"+strings.Repeat("L", 47)+"\n") {
		t.Errorf("label not cut at 47 bytes:\n%s", ld.stdout)
	}
}

// TestNotADeviceLikeCryptsetup: a path that is neither an image file nor
// a block device is "not compatible", exit 4, for readers and editors.
func TestNotADeviceLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	for _, args := range [][]string{
		{"luksDump", "/dev/null"}, {"isLuks", "/dev/zero"}, {"luksDump", w.dir},
		{"luksAddKey", "/dev/null"}, {"config", "--label", "x", w.dir},
	} {
		w.sameAs(fmt.Sprint(args), w.cs(nil, args...), w.luksd(nil, args...))
	}
}

// TestPrimaryVersionLikeCryptsetup: a primary header whose version field
// reads 3 is "Unsupported LUKS version 3." (cryptsetup goes by it), but a
// load as LUKS2 (--type luks2, config) reads through the secondary.
func TestPrimaryVersionLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("v3.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	b, _ := os.ReadFile(img)
	binary.BigEndian.PutUint16(b[6:], 3)
	os.WriteFile(img, b, 0o600)
	for _, args := range [][]string{
		{"luksDump", "IMG"}, {"isLuks", "-v", "IMG"}, {"luksUUID", "IMG"},
		{"open", "--test-passphrase", "-d", key, "IMG"},
		{"luksDump", "--type", "luks2", "IMG"}, {"config", "--label", "x", "IMG"},
		{"token", "add", "--key-description", "d", "IMG"},
	} {
		cs, ld, _, _ := w.twinRun(img, args...)
		w.sameAs(fmt.Sprint(args), cs, ld)
	}
}
