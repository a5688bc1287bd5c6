package luks2

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// reencImage is a cryptsetup-formatted 20 MiB image (pbkdf2, key file
// "pw") and its key file.
func reencImage(t *testing.T, extra ...string) (img, key string) {
	t.Helper()
	img = testtool.Image(t, 20<<20)
	key = testtool.KeyFile(t, []byte("pw"))
	cryptsetup(t, append([]string{"luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", img, key}, extra...)...)
	return img, key
}

func copyImage(t *testing.T, from string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "copy.img")
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

var saltOrDigest = regexp.MustCompile(`"(salt|digest)":"[^"]*"`)

// saltless is the image's metadata as cryptsetup dumps it (in the
// stored order), salts and digest values blanked: twins differ only there.
func saltless(t *testing.T, img string) string {
	t.Helper()
	return saltOrDigest.ReplaceAllString(cryptsetup(t, "luksDump", "--dump-json-metadata", img), `"$1":""`)
}

// cryptsetup's reencryption digest verifies with the keys, its luksDump is
// luksd's, and any change to the digested parameters is caught.
func TestReencryptDigestOfCryptsetupHeaders(t *testing.T) {
	for _, res := range []string{"checksum", "journal", "none"} {
		img, key := reencImage(t)
		cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--resilience", res,
			"--key-size", "256", "--key-file", key, img)
		h, f := readHdr(t, img)
		sameLines(t, res+" luksDump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
		v2, _ := h.v2()
		st, err := v2.reencryptState()
		if err != nil {
			t.Fatal(err)
		}
		oldVK, newVK, err := v2.reencryptKeys(f, st, []byte("pw"), -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := v2.verifyReencryptDigest(st, oldVK, newVK); err != nil {
			t.Fatalf("%s: cryptsetup's digest does not verify: %v", res, err)
		}
		if err := v2.verifyReencryptDigest(st, newVK, oldVK); err == nil {
			t.Fatalf("%s: the keys swapped verify", res)
		}
		ks := reencryptKeyslotNode(v2.meta.root)
		for _, tamper := range []struct {
			o        *node
			key, val string
		}{
			{ks, "direction", "backward"},
			{ks.get("area"), "offset", "425984"},
			{segmentByFlag(v2.meta.root, "backup-final"), "encryption", "aes-cbc-essiv:sha256"},
		} {
			was := tamper.o.get(tamper.key).str
			tamper.o.get(tamper.key).str = tamper.val
			if err := v2.verifyReencryptDigest(st, oldVK, newVK); err == nil {
				t.Errorf("%s: %s changed to %s verifies", res, tamper.key, tamper.val)
			}
			tamper.o.get(tamper.key).str = was
		}
	}
}

// luksd's reencrypt --init-only and finished reencryption leave the
// metadata cryptsetup's do, but for salts and digests.
func TestReencryptMetadataLikeCryptsetup(t *testing.T) {
	for _, c := range []struct {
		format []string
		p      ReencryptParams
		flags  []string
	}{
		{nil, ReencryptParams{KeySize: 32}, []string{"--key-size", "256"}},
		{[]string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--sector-size", "512"},
			ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 64, SectorSize: 4096, Resilience: "journal"},
			[]string{"--cipher", "aes-xts-plain64", "--key-size", "512", "--sector-size", "4096", "--resilience", "journal"}},
	} {
		img, key := reencImage(t, c.format...)
		cryptsetup(t, "luksAddKey", "-q", "--pbkdf", "argon2id", "--pbkdf-force-iterations", "4",
			"--pbkdf-memory", "32", "--key-file", key, img, key)
		// Tokens of the keyslot kept follow it to its new keyslot.
		tok := filepath.Join(t.TempDir(), "token.json")
		for _, a := range [][]string{{"0", `"0","1"`}, {"3", `"1"`}, {"5", `"0"`}} {
			mustNil(t, os.WriteFile(tok, []byte(`{"type":"luksd-test","keyslots":[`+a[1]+`]}`), 0o600))
			cryptsetup(t, "token", "import", "--json-file", tok, "--token-id", a[0], img)
		}
		mine := copyImage(t, img)
		cryptsetup(t, append([]string{"reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--key-file", key, "-S", "1", img}, c.flags...)...)
		h, f := readHdr(t, mine)
		if err := h.ReencryptInit(f, f.Size(), map[int][]byte{1: []byte("pw")}, c.p); err != nil {
			t.Fatal(err)
		}
		if a, b := saltless(t, img), saltless(t, mine); a != b {
			t.Fatalf("after init:\ncryptsetup %s\nluksd      %s", a, b)
		}
		cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--resume-only", "--key-file", key, img)
		h, f = readHdr(t, mine)
		if err := h.Reencrypt(f, f.Size(), []byte("pw"), -1, ReencryptRun{HotzoneSize: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		if a, b := saltless(t, img), saltless(t, mine); a != b {
			t.Fatalf("after the end:\ncryptsetup %s\nluksd      %s", a, b)
		}
	}
}

// Every image a power cut may leave during a reencryption (checksum and
// journal resilience) resumes to the same plaintext under the new key.
func TestReencryptPowerCuts(t *testing.T) {
	for _, res := range []string{"checksum", "journal"} {
		p := ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: res}
		n := reencPowerCuts(t, p, func(cut string, mem *devtest.Mem, h *Header, plain []byte) {
			size := mem.Size()
			if h.InReencryption() {
				if err := h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{HotzoneSize: 48 << 10}); err != nil {
					t.Fatalf("%s %s: resume: %v", res, cut, err)
				}
				var err error
				if h, err = Read(mem, size); err != nil {
					t.Fatal(err)
				}
			}
			if seg, _ := h.Segment(); cut == "after the last write" && seg.Cipher != "aes-xts-plain64" {
				t.Fatalf("%s: the reencryption left cipher %s", res, seg.Cipher)
			}
			if got := memPlaintext(t, h, mem); !bytes.Equal(got, plain) {
				t.Fatalf("%s %s: plaintext differs after resume", res, cut)
			}
		})
		t.Logf("%s: %d distinct power-cut images resumed", res, n)
	}
}

// reencPowerCuts reencrypts a small volume to p (64 KiB hotzones) and
// calls fn on each distinct image a power cut may leave, read and
// repaired as HeaderFile.Read (cryptsetup's load) does before anything
// else is written, with the volume's plaintext. It returns how many.
func reencPowerCuts(t *testing.T, p ReencryptParams, fn func(cut string, mem *devtest.Mem, h *Header, plain []byte)) int {
	t.Helper()
	before, plain := reencMemVolume(t)
	rec := devtest.NewRecorder(devtest.MemOf(before))
	size := int64(len(before))
	h, err := Read(rec, size)
	mustNil(t, err)
	mustNil(t, h.ReencryptInit(rec, size, map[int][]byte{0: []byte("pw")}, p))
	h, err = Read(rec, size)
	mustNil(t, err)
	mustNil(t, h.Reencrypt(rec, size, []byte("pw"), -1, ReencryptRun{HotzoneSize: 64 << 10}))
	seen := map[[32]byte]bool{}
	rec.PowerCuts(before, 4, func(cut string, img []byte) {
		sum := sha256.Sum256(img)
		if seen[sum] {
			return
		}
		seen[sum] = true
		mem := devtest.MemOf(img)
		h, err := Read(mem, size)
		if err != nil {
			t.Fatalf("%s %s: %v", p.Resilience, cut, err)
		}
		mustNil(t, h.Repair(mem))
		fn(cut, mem, h, plain)
	})
	return len(seen)
}

// reencMemVolume formats a small volume in memory (1 MiB keyslots area,
// 256 KiB of data, 4096-byte sectors) and fills it with random plaintext.
func reencMemVolume(t testing.TB) ([]byte, []byte) {
	t.Helper()
	const dataOff, dataSize = 2 << 20, 256 << 10
	mem := devtest.NewMem(dataOff + dataSize)
	opts := FormatOptions{Cipher: "aes-cbc-essiv:sha256", KeySize: 32, SectorSize: 4096, PBKDF: cheapPBKDF2,
		KeyslotsSize: 1 << 20, DataOffset: dataOff, Keyslot: -1}
	h, vk, err := Format(mem, dataOff+dataSize, opts, []byte("pw"))
	mustNil(t, err)
	defer clear(vk)
	seg, err := h.Segment()
	mustNil(t, err)
	plain := make([]byte, dataSize)
	rand.Read(plain)
	sc, err := dmcrypt.New(seg.Cipher, vk)
	mustNil(t, err)
	ct := bytes.Clone(plain)
	sc.Encrypt(ct, 0, seg.SectorSize)
	_, err = mem.WriteAt(ct, seg.Offset)
	mustNil(t, err)
	return mem.Bytes(), plain
}

// reencInitMem is reencMemVolume put in reencryption by ReencryptInit with
// p (passphrase "pw"): the device, its header read back and the plaintext.
func reencInitMem(t testing.TB, p ReencryptParams) (*devtest.Mem, *Header, []byte) {
	t.Helper()
	before, plain := reencMemVolume(t)
	mem := devtest.MemOf(before)
	size := int64(len(before))
	h, err := Read(mem, size)
	mustNil(t, err)
	mustNil(t, h.ReencryptInit(mem, size, map[int][]byte{0: []byte("pw")}, p))
	h, err = Read(mem, size)
	mustNil(t, err)
	return mem, h, plain
}

// memPlaintext decrypts the data segment of a volume out of reencryption.
func memPlaintext(t *testing.T, h *Header, dev Device) []byte {
	t.Helper()
	if h.InReencryption() {
		t.Fatal("still in reencryption")
	}
	vk, _, err := h.Unlock(dev, []byte("pw"), -1)
	mustNil(t, err)
	seg, err := h.Segment()
	mustNil(t, err)
	sc, err := dmcrypt.New(seg.Cipher, vk)
	mustNil(t, err)
	buf := make([]byte, 256<<10)
	_, err = dev.ReadAt(buf, seg.Offset)
	mustNil(t, err)
	sc.Decrypt(buf, 0, seg.SectorSize)
	return buf
}

// cryptsetup 2.6.1 killed while it finishes can leave every byte in the
// new cipher, the old keyslots destroyed, and the reencryption metadata
// still there; it can then neither open nor resume the volume. luksd
// finishes it with the new key alone.
func TestReencryptFinishesAbandonedEnd(t *testing.T) {
	mem, h, plain := reencInitMem(t, ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: "journal"})
	size := int64(len(mem.Bytes()))

	// The state cryptsetup leaves: data rewritten, segments final, the
	// old digest's keyslots gone.
	v2, _ := h.v2()
	st, err := v2.reencryptState()
	mustNil(t, err)
	newVK, err := v2.openDigestKey(mem, st.newDigest, []byte("pw"), -1)
	mustNil(t, err)
	sc, err := dmcrypt.New(st.newSeg.cipher, newVK)
	mustNil(t, err)
	ct := bytes.Clone(plain)
	sc.Encrypt(ct, 0, st.newSeg.sectorSize)
	_, err = mem.WriteAt(ct, int64(st.dataOffset))
	mustNil(t, err)
	total := uint64(len(plain))
	root := v2.stepSegments(st, total, 0, total, false)
	for _, s := range st.oldDigest.keyslots {
		root.get("keyslots").del(strconv.Itoa(s))
	}
	root.get("digests").get(strconv.Itoa(st.oldDigest.id)).set("keyslots", jArray())
	mustNil(t, v2.replace(mem, root))

	h, err = Read(mem, size)
	mustNil(t, err)
	if !h.InReencryption() {
		t.Fatal("the crafted state is not in reencryption")
	}
	if err := h.Reencrypt(mem, size, []byte("wrong"), -1, ReencryptRun{}); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	mustNil(t, h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{}))
	h, err = Read(mem, size)
	mustNil(t, err)
	if got := memPlaintext(t, h, mem); !bytes.Equal(got, plain) {
		t.Fatal("plaintext differs after finishing")
	}
}

// A checksum hash luksd does not have stops a reencryption with an error
// (cryptsetup: "Hash algorithm ... is not available."), before any block
// is read: every hotzone's checksums need it.
func TestReencryptUnknownChecksumHash(t *testing.T) {
	mem, h, _ := reencInitMem(t, ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: "checksum", Hash: "sha256"})
	size := int64(len(mem.Bytes()))
	v2, _ := h.v2()
	root := v2.meta.root
	reencryptKeyslotNode(root).get("area").get("hash").str = "nosuchhash"
	mustNil(t, v2.replace(mem, root))

	h, err := Read(mem, size)
	mustNil(t, err)
	v2, _ = h.v2()
	if _, err := v2.reencryptState(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("reencryption state with hash nosuchhash: %v, want ErrUnsupported", err)
	}
	if err := h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{}); err == nil {
		t.Fatal("reencryption with hash nosuchhash went on")
	}
}

// A run stopped before its first step (SIGINT right after the keys are
// opened) leaves cryptsetup's --init-only metadata as it was, and the
// segments of a step at offset 0 are that metadata's: it once wrote a
// dynamic new segment first, which no tool could read back.
func TestReencryptStoppedBeforeFirstStep(t *testing.T) {
	for _, res := range []string{"checksum", "journal", "none"} {
		img, key := reencImage(t)
		cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--resilience", res,
			"--key-size", "256", "--key-file", key, img)
		before := saltless(t, img)
		h, f := readHdr(t, img)
		v2, _ := h.v2()
		st, err := v2.reencryptState()
		mustNil(t, err)
		total := uint64(f.Size()) - st.dataOffset
		root := v2.stepSegments(st, 0, 0, total, false)
		for _, part := range []string{"segments", "digests"} {
			if a, b := string(v2.meta.root.get(part).compact()), string(root.get(part).compact()); a != b {
				t.Errorf("%s: %s at offset 0:\n%s\nwant cryptsetup's\n%s", res, part, b, a)
			}
		}
		mustNil(t, h.Reencrypt(f, f.Size(), []byte("pw"), -1, ReencryptRun{Stop: func() bool { return true }}))
		if after := saltless(t, img); after != before {
			t.Fatalf("%s: stopped at once, the metadata changed:\n%s\nwas\n%s", res, after, before)
		}
		cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--resume-only", "--key-file", key, img)
	}
}

// Stopped after any number of steps, each resilience mode leaves
// metadata that reads back, and a resumed run ends with the plaintext.
func TestReencryptStopsAtEveryStep(t *testing.T) {
	const hotzone = 64 << 10
	for _, res := range []string{"checksum", "journal", "none"} {
		for steps := 0; ; steps++ {
			mem, h, plain := reencInitMem(t, ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: res})
			size := int64(len(mem.Bytes()))
			asked := 0
			stop := func() bool { asked++; return asked > steps }
			mustNil(t, h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{HotzoneSize: hotzone, Stop: stop}))
			h, err := Read(mem, size)
			if err != nil {
				t.Fatalf("%s stopped after %d steps: %v", res, steps, err)
			}
			if !h.InReencryption() {
				if steps*hotzone < len(plain) {
					t.Fatalf("%s stopped after %d steps: finished", res, steps)
				}
				if got := memPlaintext(t, h, mem); !bytes.Equal(got, plain) {
					t.Fatalf("%s: run to the end, the plaintext differs", res)
				}
				break
			}
			mustNil(t, h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{HotzoneSize: hotzone}))
			h, err = Read(mem, size)
			mustNil(t, err)
			if got := memPlaintext(t, h, mem); !bytes.Equal(got, plain) {
				t.Fatalf("%s stopped after %d steps and resumed: the plaintext differs", res, steps)
			}
		}
	}
}
