package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// luks1DumpRandom are the lines of a LUKS1 luksDump that differ between
// two formats with the same options: the digest, the salts, their hex
// continuation lines and the UUID.
var luks1DumpRandom = regexp.MustCompile(`(?m)^(MK digest:|MK salt:|UUID:|\tSalt:|\s+\t([0-9a-f]{2} )+).*\n`)

// luks1Calibrated are the iteration counts a calibration picks.
var luks1Calibrated = regexp.MustCompile(`(?m)^(MK iterations:|\tIterations:)\s*(\d+)`)

// normalizeLUKS1Dump blanks what a second format could not reproduce;
// calibrated: the iteration counts too.
func normalizeLUKS1Dump(dump, img string, calibrated bool) string {
	dump = strings.ReplaceAll(dump, img, "IMG")
	dump = luks1DumpRandom.ReplaceAllString(dump, "")
	if calibrated {
		dump = luks1Calibrated.ReplaceAllString(dump, "$1 N")
	}
	return dump
}

// luks1Format is luksFormat of a LUKS1 volume with extra.
func luks1Format(extra ...string) []string {
	return append([]string{"luksFormat", "-q", "--type", "luks1"}, extra...)
}

// luks1Forced is luks1Format with 1000 PBKDF2 iterations forced.
func luks1Forced(extra ...string) []string {
	return luks1Format(append([]string{"--pbkdf-force-iterations", "1000"}, extra...)...)
}

// luks1FormatCases are the luksFormat lines TestLuksFormatLUKS1LikeCryptsetup
// compares.
var luks1FormatCases = []struct {
	args       []string
	size       int64
	calibrated bool // iteration counts are measured, not compared
}{
	// cryptsetup's LUKS1 defaults: aes-xts-plain64, 512 bits, sha256, PBKDF2.
	{args: luks1Forced("--uuid", compatUUID)},
	{args: luks1Forced("--pbkdf", "pbkdf2", "-v")},
	{args: luks1Forced("--type", "LUKS1")},
	{args: luks1Forced("-c", "aes-cbc-essiv:sha256")},
	{args: luks1Forced("-c", "aes-xts-plain64", "-s", "256", "-h", "sha512")},
	// A label and a subsystem are dropped without a word; 512-byte
	// sectors are LUKS1's, others are refused.
	{args: luks1Forced("--label", "L", "--subsystem", "S", "-v")},
	{args: luks1Forced("--sector-size", "512")},
	{args: luks1Forced("--sector-size", "4096")},
	{args: luks1Forced("--luks2-metadata-size", "65536")},
	{args: luks1Forced("--luks2-keyslots-size", "1048576")},
	// Keyslots 0..7.
	{args: luks1Forced("-S", "7", "-v")},
	{args: luks1Forced("-S", "8")},
	// The payload: aligned after the keyslot areas, or where told.
	{args: luks1Forced("--align-payload", "1", "-s", "256")},
	{args: luks1Forced("--align-payload", "3000")},
	{args: luks1Forced("--offset", "5000")},
	{args: luks1Forced("--offset", "100")},
	{args: luks1Forced("--offset", "2048")},
	{args: luks1Forced("--offset", "4040")},
	{args: luks1Forced("-s", "256", "--offset", "2056")},
	// A detached header (HDR): --align-payload is the payload offset.
	{args: luks1Forced("--header", "HDR")},
	{args: luks1Forced("--header", "HDR", "-s", "256")},
	{args: luks1Forced("--header", "HDR", "--offset", "8")},
	{args: luks1Forced("--header", "HDR", "--align-payload", "4036")},
	{args: luks1Forced("--header", "HDR", "--align-payload", "4040")},
	// An image smaller than the header grows to the payload offset.
	{args: luks1Forced(), size: 1 << 20},
	// PBKDF2 only, at least 1000 iterations.
	{args: luks1Format("--pbkdf-force-iterations", "999")},
	{args: luks1Format("--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "999")},
	// argon2 is reported, and PBKDF2 with its defaults (calibrated to
	// 2 s, whatever was forced) formats the volume; the hash stays.
	{args: luks1Format("--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "-h", "sha512"), calibrated: true},
}

// TestLuksFormatLUKS1LikeCryptsetup runs luksFormat --type luks1 command lines
// through cryptsetup and luksd on twin images: the same exit code, stdout,
// last line of stderr, header (cryptsetup's luksDump but for random
// fields) and file size.
func TestLuksFormatLUKS1LikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "luks1 pass")
	for i, c := range luks1FormatCases {
		name := strings.Join(c.args, " ")
		size := c.size
		if size == 0 {
			size = 20 << 20
		}
		cs := testtool.ImageAt(t, w.dir, "cs.img", size)
		mine := testtool.ImageAt(t, w.dir, "luksd.img", size)
		// With --header, the header file is what is compared.
		csHdr, myHdr := w.path("cs.hdr"), w.path("luksd.hdr")
		os.Remove(csHdr)
		os.Remove(myHdr)
		with := func(hdr string) []string {
			out := append([]string(nil), c.args...)
			for j, a := range out {
				if a == "HDR" {
					out[j] = hdr
				}
			}
			return out
		}
		want := w.cs(nil, append(with(csHdr), cs, key)...)
		got := w.luksd(nil, append(with(myHdr), mine, key)...)
		if slices.Contains(c.args, "HDR") {
			cs, mine = csHdr, myHdr
		}
		want.stdout = strings.ReplaceAll(want.stdout, cs, "IMG")
		got.stdout = strings.ReplaceAll(got.stdout, mine, "IMG")
		if got.code != want.code || got.stdout != want.stdout {
			t.Errorf("%d %q: luksd exit %d stdout %q stderr %q; cryptsetup exit %d stdout %q stderr %q",
				i, name, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			continue
		}
		// cryptsetup adds "Failed to set pbkdf parameters." under the
		// reason; luksd's one line is the reason.
		if ws, gs := strings.TrimSpace(want.stderr), strings.TrimSpace(got.stderr); (ws == "") != (gs == "") || strings.Contains(gs, "\n") || !strings.Contains(ws, gs) {
			t.Errorf("%d %q: luksd says %q, cryptsetup %q", i, name, gs, ws)
		}
		if want.code != 0 {
			// (cryptsetup leaves 4 KiB in a new header file; luksd nothing.)
			if b, _ := os.ReadFile(mine); !bytes.Equal(b, make([]byte, len(b))) {
				t.Errorf("%d %q: a refused format wrote to the image", i, name)
			}
			continue
		}
		a := normalizeLUKS1Dump(w.cs(nil, "luksDump", cs).ok(t).stdout, cs, c.calibrated)
		b := normalizeLUKS1Dump(w.cs(nil, "luksDump", mine).ok(t).stdout, mine, c.calibrated)
		if a != b {
			t.Errorf("%d %q: headers differ:\n--- cryptsetup\n%s--- luksd\n%s", i, name, a, b)
		}
		if !strings.Contains(b, "Version:       \t1\n") {
			t.Errorf("%d %q: not LUKS1:\n%s", i, name, b)
		}
		if c.calibrated {
			m := luks1Calibrated.FindAllStringSubmatch(w.cs(nil, "luksDump", mine).stdout, -1)
			if len(m) != 2 || atoiT(t, m[1][2]) <= 1000 {
				t.Errorf("%d %q: keyslot iterations not calibrated: %v", i, name, m)
			}
		}
		csInfo, _ := os.Stat(cs)
		myInfo, _ := os.Stat(mine)
		if csInfo.Size() != myInfo.Size() {
			t.Errorf("%d %q: image size %d, cryptsetup's %d", i, name, myInfo.Size(), csInfo.Size())
		}
	}
}

// TestLuksFormatLUKS1OpensAndServes: a LUKS1 volume luksd formats opens in
// cryptsetup to the volume key luksd reads, and luksd serves it: what is
// written through NBD decrypts, with cryptsetup's key and x/crypto/xts,
// to the same bytes.
func TestLuksFormatLUKS1OpensAndServes(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "luks1 served")
	img := testtool.ImageAt(t, w.dir, "vol.img", 8<<20)
	w.luksd(nil, "luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", img, key).ok(t)
	w.cs(nil, "open", "--test-passphrase", "-d", key, img).ok(t)
	w.cs(nil, "isLuks", "--type", "luks1", img).ok(t)
	vkHex := w.sameVolumeKey(img, key, 512)

	p := startServe(t, filepath.Join(w.dir, "s"), "--key-file", key, img)
	data := make([]byte, 4<<20)
	rand.Read(data)
	src := w.path("src")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	testtool.Run(t, "nbdcopy", src, p.uri())
	p.stop(t)

	vk, off := serveVolumeKey(t, img, key)
	if hex.EncodeToString(vk) != vkHex {
		t.Fatalf("cryptsetup's volume key changed after serving")
	}
	if off != 2<<20 {
		t.Fatalf("payload at %d bytes, want cryptsetup's 2 MiB", off)
	}
	if got := xtsDecrypt(t, img, vk, off, int64(len(data)), 512); !bytes.Equal(got, data) {
		t.Fatal("what luksd served does not decrypt with cryptsetup's key to what was written")
	}
}

// TestLUKS1LoadRefusalsWordForWord pins the messages of a LUKS1 header
// that does not load: cryptsetup's "LUKS keyslot N is invalid." (which
// luks2 returns without its full stop; the CLI adds it, also behind
// luksHeaderRestore's prefix) and luksd's "Device is too small." line.
func TestLUKS1LoadRefusalsWordForWord(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pass")
	good := w.image("good.img")
	w.cs(nil, append(append([]string{"luksFormat", "-q", "--type", "luks1", "-d", key}, cheapPBKDF("pbkdf2")...), good)...).ok(t)
	img, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Keyslot 1 with 3999 AF stripes: cryptsetup refuses to load it.
	bad := bytes.Clone(img)
	binary.BigEndian.PutUint32(bad[208+48+44:], 3999)
	badImg := filepath.Join(w.dir, "bad.img")
	csImg := filepath.Join(w.dir, "cs-bad.img")
	for _, p := range []string{badImg, csImg} {
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const invalid = "LUKS keyslot 1 is invalid.\n"
	if r := w.cs(nil, "luksDump", csImg); r.code != 1 || !strings.HasPrefix(r.stderr, invalid) {
		t.Fatalf("cryptsetup: exit %d, %q", r.code, r.stderr)
	}
	if r := w.luksd(nil, "luksDump", badImg); r.code != 1 || r.stderr != invalid {
		t.Fatalf("luksd luksDump: exit %d, %q; want %q", r.code, r.stderr, invalid)
	}
	restored := w.image("restored.img")
	w.cs(nil, append(append([]string{"luksFormat", "-q", "--type", "luks1", "-d", key}, cheapPBKDF("pbkdf2")...), restored)...).ok(t)
	const prefixed = "backup file does not contain a valid LUKS header: " + invalid
	if r := w.luksd(nil, "luksHeaderRestore", "-q", restored, "--header-backup-file", badImg); r.code != 1 || r.stderr != prefixed {
		t.Fatalf("luksd luksHeaderRestore: exit %d, %q; want %q", r.code, r.stderr, prefixed)
	}
	short := filepath.Join(w.dir, "short.img")
	if err := os.WriteFile(short, img[:600<<10], 0o600); err != nil {
		t.Fatal(err)
	}
	const small = "Device is too small. (LUKS1 requires at least 2097152 bytes.)\n"
	if r := w.luksd(nil, "luksDump", short); r.code != 1 || r.stderr != small {
		t.Fatalf("luksd luksDump of a cut image: exit %d, %q; want %q", r.code, r.stderr, small)
	}
}
