package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// sameRepair runs repair (and extra) through both tools on copies of img
// and expects the same exit code, messages and bytes (LUKS2 header copies
// rewritten with their own random salt: salts and checksums aside).
func (w *workspace) sameRepair(what, img string, extra ...string) (cs, ld result) {
	w.t.Helper()
	for _, flags := range [][]string{{"-q"}, {"-q", "-v"}} {
		args := append(append([]string{"repair", "IMG"}, flags...), extra...)
		var csImg, ldImg []byte
		cs, ld, csImg, ldImg = w.twinRun(img, args...)
		w.sameAs(fmt.Sprintf("%s: %v", what, args), cs, ld)
		sameConversion(w.t, fmt.Sprintf("%s: %v", what, args), csImg, ldImg)
	}
	return cs, ld
}

// TestRepairLUKS1PeerImagesLikeCryptsetup: cryptsetup's crafted LUKS1
// headers (keyslots overlapping, reaching into the payload, bad stripes,
// a device too small) are repaired, or refused, as cryptsetup 2.6.1
// repairs them: the same messages, exit code and header bytes.
func TestRepairLUKS1PeerImagesLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	corpus := testtool.PeerCorpus(t)
	xz := testtool.Need(t, "xz")
	evil, _ := filepath.Glob(filepath.Join(corpus, "evil_hdr-*.xz"))
	if len(evil) < 5 {
		t.Fatalf("found %d evil_hdr images in the corpus", len(evil))
	}
	for _, f := range evil {
		img := w.path(strings.TrimSuffix(filepath.Base(f), ".xz") + ".img")
		out, err := exec.Command(xz, "-dc", f).Output()
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(img, out, 0o600)
		w.sameRepair(filepath.Base(img), img)
	}
	// A sound LUKS1 header: nothing to do, as cryptsetup says with -v.
	key := w.key("key", "pw")
	good := w.image("good1.img")
	w.cs(nil, append(luks1Forced(), good, key)...).ok(t)
	w.sameRepair("sound LUKS1", good)
	w.sameRepair("sound LUKS1 --type luks2", good, "--type", "luks2")
}

// TestRepairLUKS2LikeCryptsetup: a LUKS2 header with a damaged primary or
// secondary copy, both, another filesystem's superblock over the primary,
// or none at all, is repaired (or refused) as by cryptsetup.
func TestRepairLUKS2LikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	base := w.image("base.img")
	w.cs(nil, append(luks2PBKDF2(), base, key)...).ok(t)
	orig, _ := os.ReadFile(base)
	damage := func(name string, ranges ...[2]int) string {
		b := append([]byte(nil), orig...)
		for _, r := range ranges {
			rand.Read(b[r[0]:r[1]])
		}
		p := w.path(name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	w.sameRepair("sound LUKS2", base)
	w.sameRepair("damaged primary", damage("primary.img", [2]int{0, 4096}))
	w.sameRepair("damaged primary JSON", damage("primaryjson.img", [2]int{5000, 6000}))
	w.sameRepair("damaged secondary", damage("secondary.img", [2]int{16384, 20480}))
	w.sameRepair("both damaged", damage("both.img", [2]int{0, 4096}, [2]int{16384, 20480}))
	w.sameRepair("not LUKS", w.image("empty.img"))
	// Another filesystem's superblock over the primary: a load refuses,
	// repair rewrites the primary from the secondary.
	mkfs := testtool.Need(t, "mkfs.ext4")
	fs := testtool.ImageAt(t, w.dir, "fs.img", 8<<20)
	if out, err := exec.Command(mkfs, "-q", "-F", fs).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	sb, _ := os.ReadFile(fs)
	amb := append([]byte(nil), orig...)
	copy(amb, sb[:4096])
	ambImg := w.path("amb.img")
	os.WriteFile(ambImg, amb, 0o600)
	w.sameRepair("ext4 superblock over the primary", ambImg)
	_, ld, _, ldImg := w.twinRun(ambImg, "repair", "-q", "IMG")
	conv := w.path("repaired.img")
	os.WriteFile(conv, ldImg, 0o600)
	if ld.code != 0 || w.luksd(nil, "open", "--test-passphrase", "-d", key, conv).code != 0 {
		t.Error("the repaired volume does not open")
	}
}

// TestRepairReencryptionLikeCryptsetup: repair of a volume in the middle
// of a cryptsetup reencryption verifies its reencryption metadata with the
// passphrase, as cryptsetup does: the right one passes, a wrong one fails
// with cryptsetup's exit code.
func TestRepairReencryptionLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	reencrypting, _, key := requirementImages(t, w)
	bad := w.key("bad", "nope")
	w.sameRepair("reencryption", reencrypting, "-d", key)
	cs, ld, _, _ := w.twinRun(reencrypting, "repair", "-q", "IMG", "-d", bad)
	if cs.code != ld.code || cs.code == 0 {
		t.Errorf("wrong passphrase: cryptsetup exit %d %q, luksd exit %d %q", cs.code, cs.stderr, ld.code, ld.stderr)
	}
}

// TestRepairCrashedReencryptionLikeCryptsetup: a cryptsetup reencryption
// killed in the middle of a hotzone is recovered by repair (after its
// question, with the passphrase) as cryptsetup recovers it: the same exit
// code and messages, and cryptsetup then resumes luksd's repaired copy
// without asking for a repair and finishes with the data intact.
func TestRepairCrashedReencryptionLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	c := reencCases[1]
	base, plain := reencImage(w, "base.img", c, key, 32<<20)
	flags := append([]string{"--resilience", "checksum", "--hotzone-size", "65536", "-d", key, "--force-offline-reencrypt", "-q"}, c.reencrypt...)
	w.cs(nil, append([]string{"reencrypt", "--init-only", base}, append(flags, cheapPBKDF("pbkdf2")...)...)...).ok(t)
	img := w.path("crashed.img")
	delay := 30 * time.Millisecond
	crashed := false
	for range 40 {
		copyFile(t, base, img)
		interrupt(t, delay, syscall.SIGKILL, w.cryptsetup, append([]string{"reencrypt", "--resume-only", img}, flags...)...)
		js := w.cs(nil, "luksDump", "--dump-json-metadata", img).stdout
		if strings.Contains(js, "in-reencryption") {
			crashed = true
			break
		}
		if !strings.Contains(js, "reencrypt") {
			delay = max(delay*2/3, time.Millisecond) // finished: kill sooner
		} else {
			delay = delay * 5 / 4
		}
	}
	if !crashed {
		t.Skip("no kill left a hotzone half done in 40 tries (timing); the clean case is TestRepairReencryptionLikeCryptsetup")
	}
	cs, ld, csImg, ldImg := w.twinRun(img, "repair", "-q", "IMG", "-d", key)
	w.sameAs("crashed reencryption", cs, ld)
	for tool, b := range map[string][]byte{"cryptsetup": csImg, "luksd": ldImg} {
		p := w.path(tool + "-repaired.img")
		os.WriteFile(p, b, 0o600)
		if js := w.cs(nil, "luksDump", "--dump-json-metadata", p).stdout; strings.Contains(js, "in-reencryption") {
			t.Errorf("%s's repair left the hotzone", tool)
		}
		r := w.cs(nil, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, p)
		if r.code != 0 {
			t.Fatalf("cryptsetup resuming after %s's repair: exit %d %s", tool, r.code, r.stderr)
		}
		w.checkData(p, key, c, plain)
	}
}
