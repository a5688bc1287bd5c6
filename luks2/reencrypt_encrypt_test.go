package luks2

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

const encUUID = "0c5c4a6f-4bb1-4b5a-8a7e-3a1f0a6a1e01"

// plainImage is a size-byte image of random plaintext, and that plaintext.
func plainImage(t *testing.T, size int64) (string, []byte) {
	t.Helper()
	img := testtool.Image(t, size)
	plain := make([]byte, size)
	rand.Read(plain)
	mustNil(t, os.WriteFile(img, plain, 0o600))
	return img, plain
}

// encryptedPlaintext decrypts n bytes of a volume encrypted by
// --encrypt, with the volume key cryptsetup dumps.
func encryptedPlaintext(t *testing.T, img, key string, n int) []byte {
	t.Helper()
	h, f := readHdr(t, img)
	if h.InReencryption() {
		t.Fatalf("%s: still in reencryption", img)
	}
	seg, err := h.Segment()
	mustNil(t, err)
	sc, err := dmcrypt.New(seg.Cipher, cryptsetupVolumeKey(t, img, key))
	mustNil(t, err)
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, seg.Offset)
	mustNil(t, err)
	sc.Decrypt(buf, 0, seg.SectorSize)
	return buf
}

// luksd's --encrypt with a data shift writes the metadata cryptsetup
// writes, after --init-only and at the end, and the data decrypts to the
// plaintext; each tool finishes the other's encryption.
func TestEncryptShiftLikeCryptsetup(t *testing.T) {
	key := testtool.KeyFile(t, []byte("pw"))
	for _, c := range []struct {
		size, reduce int64
		flags        []string
		opts         FormatOptions
	}{
		{5 << 20, 4 << 20, nil, FormatOptions{}},         // data smaller than the shift
		{12 << 20, 2 << 20, nil, FormatOptions{}},        // several hotzones
		{3<<20 + 512<<10, 2 << 20, nil, FormatOptions{}}, // a short hotzone before the moved one
		{10 << 20, 2 << 20, []string{"--sector-size", "4096", "--cipher", "aes-cbc-essiv:sha256", "--key-size", "256"},
			FormatOptions{SectorSize: 4096, Cipher: "aes-cbc-essiv:sha256", KeySize: 32}},
	} {
		base, plain := plainImage(t, c.size)
		theirs, mine := copyImage(t, base), copyImage(t, base)
		cryptsetup(t, append([]string{"reencrypt", "--encrypt", "--init-only", "--reduce-device-size", itoa(c.reduce),
			"--force-offline-reencrypt", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
			"--uuid", encUUID, "-d", key, theirs}, c.flags...)...)
		f, size := openRW(t, mine)
		opts := c.opts
		opts.PBKDF, opts.UUID, opts.Keyslot = cheapPBKDF2, encUUID, -1
		mustNil(t, EncryptInit(f, size, c.reduce, opts, []byte("pw")))
		if a, b := saltless(t, theirs), saltless(t, mine); a != b {
			t.Fatalf("%d/%d after init:\ncryptsetup %s\nluksd      %s", c.size, c.reduce, a, b)
		}
		// Each finishes its own, then the other's.
		other, otherMine := copyImage(t, mine), copyImage(t, theirs)
		cryptsetup(t, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, theirs)
		cryptsetup(t, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, other)
		for _, img := range []string{mine, otherMine} {
			h, f := readHdr(t, img)
			mustNil(t, h.Reencrypt(f, size, []byte("pw"), -1, ReencryptRun{}))
		}
		if a, b := saltless(t, theirs), saltless(t, mine); a != b {
			t.Fatalf("%d/%d at the end:\ncryptsetup %s\nluksd      %s", c.size, c.reduce, a, b)
		}
		n := int(c.size - c.reduce)
		for _, img := range []string{theirs, mine, other, otherMine} {
			if got := encryptedPlaintext(t, img, key, n); !bytes.Equal(got, plain[:n]) {
				t.Fatalf("%d/%d: %s decrypts to other data (from byte %d)", c.size, c.reduce, img, firstDifference(got, plain))
			}
		}
	}
}

// Every image a power cut may leave during luksd's encryption with a data
// shift resumes to the plaintext.
func TestEncryptShiftPowerCuts(t *testing.T) {
	const size, reduce = 2<<20 + 512<<10, 1 << 20
	before := make([]byte, size)
	rand.Read(before)
	plain := bytes.Clone(before[:size-reduce])
	rec := devtest.NewRecorder(devtest.MemOf(bytes.Clone(before)))
	opts := FormatOptions{PBKDF: cheapPBKDF2, Keyslot: -1, Cipher: "aes-xts-plain64", KeySize: 32}
	mustNil(t, EncryptInit(rec, size, reduce, opts, []byte("pw")))
	h, err := Read(rec, size)
	mustNil(t, err)
	mustNil(t, h.Reencrypt(rec, size, []byte("pw"), -1, ReencryptRun{}))
	seen := map[[32]byte]bool{}
	resumed := 0
	rec.PowerCuts(before, 4, func(cut string, img []byte) {
		sum := sha256.Sum256(img)
		if seen[sum] {
			return
		}
		seen[sum] = true
		mem := devtest.MemOf(img)
		h, err := Read(mem, size)
		if err != nil {
			// Cut before the header was whole: the plaintext is still
			// there, as with cryptsetup (its header restore).
			if !bytes.Equal(img[reduce/2:size-reduce], plain[reduce/2:]) {
				t.Fatalf("%s: no header and the plaintext is damaged", cut)
			}
			return
		}
		mustNil(t, h.Repair(mem))
		if h.InReencryption() {
			if err := h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{}); err != nil {
				t.Fatalf("%s: resume: %v", cut, err)
			}
			h, err = Read(mem, size)
			mustNil(t, err)
		}
		resumed++
		vk, _, err := h.Unlock(mem, []byte("pw"), -1)
		mustNil(t, err)
		seg, err := h.Segment()
		mustNil(t, err)
		sc, err := dmcrypt.New(seg.Cipher, vk)
		mustNil(t, err)
		got := make([]byte, len(plain))
		_, err = mem.ReadAt(got, seg.Offset)
		mustNil(t, err)
		sc.Decrypt(got, 0, seg.SectorSize)
		if !bytes.Equal(got, plain) {
			t.Fatalf("%s: plaintext differs after resume from byte %d", cut, firstDifference(got, plain))
		}
	})
	if resumed == 0 {
		t.Fatal("no power-cut image had a header")
	}
	t.Logf("%d distinct power-cut images, %d with a header resumed", len(seen), resumed)
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Part-way, luksd's metadata is cryptsetup's: cryptsetup is killed
// between two hotzones, luksd stopped after as many, and the metadata
// compared but for salts and digests.
func TestEncryptShiftStepsLikeCryptsetup(t *testing.T) {
	const size, reduce = 32 << 20, 2 << 20
	dir := t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "luksd-encrypt-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	key := testtool.KeyFile(t, []byte("pw"))
	base, _ := plainImage(t, size)
	theirs, mine := filepath.Join(dir, "theirs.img"), filepath.Join(dir, "mine.img")
	copyTo(t, base, theirs)
	copyTo(t, base, mine)
	cryptsetup(t, "reencrypt", "--encrypt", "--init-only", "--reduce-device-size", itoa(reduce), "--force-offline-reencrypt",
		"-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--uuid", encUUID, "-d", key, theirs)
	f, _ := openRW(t, mine)
	mustNil(t, EncryptInit(f, size, reduce, FormatOptions{PBKDF: cheapPBKDF2, UUID: encUUID, Keyslot: -1}, []byte("pw")))
	killed, stopped := filepath.Join(dir, "killed.img"), filepath.Join(dir, "stopped.img")
	compared := 0
	delay := 5 * time.Millisecond
	for try := 0; try < 40 && compared < 3; try++ {
		copyTo(t, theirs, killed)
		cmd := exec.Command("cryptsetup", "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, killed)
		mustNil(t, cmd.Start())
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		h, kf := readHdr(t, killed)
		v2, _ := h.v2()
		active := activeSegments(v2.meta.root)
		left := remaining(active)
		switch {
		case !h.InReencryption() || left == 0:
			delay = max(delay*2/3, time.Millisecond)
			continue
		case hotIndex(active) >= 0 || len(active) < 3 && left == size-reduce:
			delay += 3 * time.Millisecond
			continue
		}
		kf.Close()
		copyTo(t, mine, stopped)
		h, sf := readHdr(t, stopped)
		var done int64
		run := ReencryptRun{
			Progress: func(d, total int64) { done = total - d },
			Stop:     func() bool { return uint64(done) <= left },
		}
		mustNil(t, h.Reencrypt(sf, size, []byte("pw"), -1, run))
		if a, b := saltless(t, killed), saltless(t, stopped); a != b {
			t.Fatalf("%d bytes left:\ncryptsetup %s\nluksd      %s", left, a, b)
		}
		compared++
		t.Logf("same metadata with %d bytes left", left)
		delay += 7 * time.Millisecond
	}
	if compared == 0 {
		t.Fatal("no kill left cryptsetup between two hotzones")
	}
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	mustNil(t, err)
	mustNil(t, os.WriteFile(to, b, 0o600))
}
