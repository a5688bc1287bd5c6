package luks2

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// luksImage is a LUKS2 image made by cryptsetup (extra: luksFormat
// options) holding random plaintext, written with the volume key; it
// returns the image, the key file and the plaintext.
func luksImage(t *testing.T, size int64, extra ...string) (string, string, []byte) {
	t.Helper()
	img := testtool.Image(t, size)
	key := testtool.KeyFile(t, []byte("pw"))
	cryptsetup(t, append([]string{"luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", img, key}, extra...)...)
	h, f := readHdr(t, img)
	seg, err := h.Segment()
	mustNil(t, err)
	sc, err := dmcrypt.New(seg.Cipher, cryptsetupVolumeKey(t, img, key))
	mustNil(t, err)
	plain := make([]byte, size-seg.Offset)
	rand.Read(plain)
	ct := bytes.Clone(plain)
	sc.Encrypt(ct, 0, seg.SectorSize)
	_, err = f.WriteAt(ct, seg.Offset)
	mustNil(t, err)
	return img, key, plain
}

// decryptBoth starts the decryption of a copy of img with cryptsetup and
// of another with luksd (extra: cryptsetup's options, p: luksd's); it
// returns each data image and header file.
func decryptBoth(t *testing.T, img, key string, p DecryptParams, extra ...string) (theirs, theirsHdr, mine, mineHdr string) {
	t.Helper()
	dir := t.TempDir()
	theirs, mine = copyImage(t, img), copyImage(t, img)
	theirsHdr, mineHdr = filepath.Join(dir, "theirs.hdr"), filepath.Join(dir, "mine.hdr")
	cryptsetup(t, append([]string{"reencrypt", "--decrypt", "--init-only", "--header", theirsHdr, "--force-offline-reencrypt",
		"-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", key, theirs}, extra...)...)
	h, f := readHdr(t, mine)
	hf, err := os.OpenFile(mineHdr, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	mustNil(t, err)
	mustNil(t, hf.Truncate(h.DecryptExportSize()))
	defer hf.Close()
	st, err := f.Stat()
	mustNil(t, err)
	p.BlockSize = 4096
	mustNil(t, h.DecryptInit(f, fileDev{hf}, st.Size(), []byte("pw"), -1, p))
	return theirs, theirsHdr, mine, mineHdr
}

// resumeDecrypt runs luksd's decryption of data with header hdr.
func resumeDecrypt(t *testing.T, data, hdr string, run ReencryptRun) error {
	t.Helper()
	df, size := openRW(t, data)
	h, hf := readHdr(t, hdr)
	run.Data = df
	return h.Reencrypt(hf, size, []byte("pw"), -1, run)
}

// iterations blanks PBKDF2 iteration counts: cryptsetup benchmarks the
// decryption's reencryption digest whatever --pbkdf-force-iterations says
// (any count verifies).
var iterations = regexp.MustCompile(`"iterations":[0-9]+`)

// decryptless is saltless with iteration counts blanked.
func decryptless(t *testing.T, img string) string {
	t.Helper()
	return iterations.ReplaceAllString(saltless(t, img), `"iterations":0`)
}

// The decryption's metadata is cryptsetup's at init, the data images are
// the same, each tool finishes the other's, and the data device holds the
// plaintext at offset 0.
func TestDecryptShiftLikeCryptsetup(t *testing.T) {
	for _, c := range []struct {
		size  int64
		flags []string // luksFormat's
		extra []string // reencrypt's
		p     DecryptParams
	}{
		{56 << 20, nil, nil, DecryptParams{}}, // hotzones of the shift, then the moved part
		{20 << 20, nil, nil, DecryptParams{}}, // data smaller than the shift: all moved
		{26 << 20, []string{"--sector-size", "512"}, []string{"--resilience", "journal", "--hotzone-size", "1M"},
			DecryptParams{Resilience: "journal", MovedSize: 1 << 20}}, // a short last hotzone
		{30 << 20, []string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256"}, []string{"--hotzone-size", "2M"},
			DecryptParams{MovedSize: 2 << 20}},
	} {
		img, key, plain := luksImage(t, c.size, c.flags...)
		theirs, theirsHdr, mine, mineHdr := decryptBoth(t, img, key, c.p, c.extra...)
		if a, b := decryptless(t, theirsHdr), decryptless(t, mineHdr); a != b {
			t.Fatalf("%d after init:\ncryptsetup %s\nluksd      %s", c.size, a, b)
		}
		a, _ := os.ReadFile(theirs)
		b, _ := os.ReadFile(mine)
		if !bytes.Equal(a, b) {
			t.Fatalf("%d after init: the data images differ from byte %d", c.size, firstDifference(a, b))
		}
		other, otherHdr := copyImage(t, mine), copyImage(t, mineHdr)
		otherMine, otherMineHdr := copyImage(t, theirs), copyImage(t, theirsHdr)
		for _, d := range [][2]string{{theirs, theirsHdr}, {other, otherHdr}} {
			cryptsetup(t, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, "--header", d[1], d[0])
		}
		for _, d := range [][2]string{{mine, mineHdr}, {otherMine, otherMineHdr}} {
			mustNil(t, resumeDecrypt(t, d[0], d[1], ReencryptRun{}))
		}
		if a, b := decryptless(t, theirsHdr), decryptless(t, mineHdr); a != b {
			t.Fatalf("%d at the end:\ncryptsetup %s\nluksd      %s", c.size, a, b)
		}
		for _, d := range []string{theirs, mine, other, otherMine} {
			got, _ := os.ReadFile(d)
			if !bytes.Equal(got[:len(plain)], plain) {
				t.Fatalf("%d: %s holds other data (from byte %d)", c.size, d, firstDifference(got, plain))
			}
		}
	}
}

// part is a window of a device: the header file and the data device of a
// power-cut trial share one recorder, so their writes are cut in order.
type part struct {
	Device
	base, size int64
}

func (p part) ReadAt(b []byte, off int64) (int, error)  { return p.Device.ReadAt(b, p.base+off) }
func (p part) WriteAt(b []byte, off int64) (int, error) { return p.Device.WriteAt(b, p.base+off) }

// Every state a power cut may leave during luksd's decryption, from the
// header export on, is resumed to the plaintext by luksd, and every
// sixth one in decryption by cryptsetup too; before the metadata
// marks the decryption, the ciphertext is where the header says.
func TestDecryptShiftPowerCuts(t *testing.T) {
	img, key, plain := luksImage(t, 4<<20+512<<10, "--luks2-keyslots-size", "256k", "--key-size", "256")
	data, err := os.ReadFile(img)
	mustNil(t, err)
	h, f := readHdr(t, img)
	f.Close()
	seg, err := h.Segment()
	mustNil(t, err)
	shift, hsize, dsize := seg.Offset, h.DecryptExportSize(), int64(len(data))
	before := append(make([]byte, hsize), data...)
	rec := devtest.NewRecorder(devtest.MemOf(before))
	hdr, dat := part{rec, 0, hsize}, part{rec, hsize, dsize}
	mustNil(t, h.DecryptInit(dat, hdr, dsize, []byte("pw"), -1, DecryptParams{BlockSize: 4096}))
	h, err = Read(hdr, hsize)
	mustNil(t, err)
	mustNil(t, h.Reencrypt(hdr, dsize, []byte("pw"), -1, ReencryptRun{Data: dat}))
	seen := map[[32]byte]bool{}
	resumed, theirs := 0, 0
	rec.PowerCuts(before, 4, func(cut string, img []byte) {
		sum := sha256.Sum256(img)
		if seen[sum] {
			return
		}
		seen[sum] = true
		mem := devtest.MemOf(img)
		hdr, dat := part{mem, 0, hsize}, part{mem, hsize, dsize}
		h, err := Read(hdr, hsize)
		switch {
		case err != nil:
			// The export was cut: the data device is untouched.
			if !bytes.Equal(img[hsize:], data) {
				t.Fatalf("%s: no header exported and the data device changed", cut)
			}
			return
		case !h.InReencryption():
			if v2, _ := h.v2(); v2.meta.segments[0].typ == "linear" {
				checkPlain(t, cut, dat, plain)
				return
			}
			// Exported, not marked: the ciphertext is untouched after
			// the old data offset.
			if !bytes.Equal(img[hsize+shift:], data[shift:]) {
				t.Fatalf("%s: not marked and the ciphertext is damaged", cut)
			}
			return
		}
		mustNil(t, h.Repair(hdr))
		v2, _ := h.v2()
		// cryptsetup 2.6.1 decrypts the moved part a second time when
		// the last hotzone is committed and the end is not: luksd only.
		if len(seen)%6 == 0 && lastCrypt(activeSegments(v2.meta.root)) >= 0 {
			theirs++
			dir := t.TempDir()
			hf, df := filepath.Join(dir, "hdr"), filepath.Join(dir, "data")
			mustNil(t, os.WriteFile(hf, img[:hsize], 0o600))
			mustNil(t, os.WriteFile(df, img[hsize:], 0o600))
			cryptsetup(t, "repair", "-q", "-d", key, "--header", hf, df)
			// A repair that recovers the last hotzone ends the decryption.
			if strings.Contains(cryptsetup(t, "luksDump", hf), "online-reencrypt") {
				cryptsetup(t, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, "--header", hf, df)
			}
			got, _ := os.ReadFile(df)
			if !bytes.Equal(got[:len(plain)], plain) {
				t.Fatalf("%s: cryptsetup's resume leaves other data from byte %d", cut, firstDifference(got, plain))
			}
		}
		if err := h.Reencrypt(hdr, dsize, []byte("pw"), -1, ReencryptRun{Data: dat}); err != nil {
			t.Fatalf("%s: resume: %v", cut, err)
		}
		resumed++
		checkPlain(t, cut, dat, plain)
	})
	if resumed == 0 || theirs == 0 {
		t.Fatal("no power-cut image was in decryption")
	}
	t.Logf("%d distinct power-cut images, %d in decryption resumed, %d of them by cryptsetup too", len(seen), resumed, theirs)
}

// checkPlain fails unless data starts with plain.
func checkPlain(t *testing.T, what string, data DataDevice, plain []byte) {
	t.Helper()
	got := make([]byte, len(plain))
	_, err := data.ReadAt(got, 0)
	mustNil(t, err)
	if !bytes.Equal(got, plain) {
		t.Fatalf("%s: plaintext differs from byte %d", what, firstDifference(got, plain))
	}
}
