package luks2

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// encryptDetachedPair is a plain image twice (theirs, mine) and each
// one's header file path, the plaintext and the key file.
func encryptDetachedPair(t *testing.T, size int64) (theirs, theirsHdr, mine, mineHdr string, plain []byte, key string) {
	t.Helper()
	dir := t.TempDir()
	key = testtool.KeyFile(t, []byte("pw"))
	base, plain := plainImage(t, size)
	theirs, mine = filepath.Join(dir, "theirs.img"), filepath.Join(dir, "mine.img")
	copyTo(t, base, theirs)
	copyTo(t, base, mine)
	return theirs, theirs + ".hdr", mine, mine + ".hdr", plain, key
}

// initDetached marks mine for encryption with its header on hdr.
func initDetached(t *testing.T, hdr string, size int64, p ReencryptParams) {
	t.Helper()
	f, err := os.OpenFile(hdr, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	mustNil(t, err)
	defer f.Close()
	mustNil(t, EncryptInitDetached(fileDev{f}, size, FormatOptions{PBKDF: cheapPBKDF2, UUID: encUUID, Keyslot: -1},
		[]byte("pw"), p, 4096))
}

// runDetached runs (or resumes) the encryption of data with its header hdr.
func runDetached(t *testing.T, data, hdr string, run ReencryptRun) {
	t.Helper()
	h, hf := readHdr(t, hdr)
	df, size := openRW(t, data)
	run.Data = df
	mustNil(t, h.Reencrypt(hf, size, []byte("pw"), -1, run))
}

// detachedPlaintext decrypts the data of an encrypted volume whose header
// is hdr, with the volume key cryptsetup dumps.
func detachedPlaintext(t *testing.T, data, hdr, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(data)
	mustNil(t, err)
	h, _ := readHdr(t, hdr)
	seg, err := h.Segment()
	mustNil(t, err)
	sc, err := dmcrypt.New(seg.Cipher, cryptsetupVolumeKey(t, hdr, key))
	mustNil(t, err)
	sc.Decrypt(b, 0, seg.SectorSize)
	return b
}

// luksd's --encrypt --header writes the header cryptsetup writes, after
// --init-only and at the end, for each resilience mode; each tool
// finishes the other's encryption and the data decrypts to the plaintext.
func TestEncryptDetachedLikeCryptsetup(t *testing.T) {
	const size = 4 << 20
	for _, res := range []string{"checksum", "journal", "none"} {
		theirs, theirsHdr, mine, mineHdr, plain, key := encryptDetachedPair(t, size)
		cryptsetup(t, "reencrypt", "--encrypt", "--init-only", "--header", theirsHdr, "--force-offline-reencrypt", "-q",
			"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--uuid", encUUID, "--resilience", res, "-d", key, theirs)
		initDetached(t, mineHdr, size, ReencryptParams{Resilience: res})
		if a, b := saltless(t, theirsHdr), saltless(t, mineHdr); a != b {
			t.Fatalf("%s init:\ncryptsetup %s\nluksd      %s", res, a, b)
		}
		a, _ := os.Stat(theirsHdr)
		b, _ := os.Stat(mineHdr)
		if a.Size() != b.Size() {
			t.Fatalf("%s: header file of %d bytes, cryptsetup's %d", res, b.Size(), a.Size())
		}
		// Each finishes the other's.
		runDetached(t, theirs, theirsHdr, ReencryptRun{HotzoneSize: 1 << 20})
		cryptsetup(t, "reencrypt", "--resume-only", "--header", mineHdr, "--force-offline-reencrypt", "-q", "-d", key, mine)
		if a, b := saltless(t, theirsHdr), saltless(t, mineHdr); a != b {
			t.Fatalf("%s end:\ncryptsetup %s\nluksd      %s", res, a, b)
		}
		for _, img := range [][2]string{{theirs, theirsHdr}, {mine, mineHdr}} {
			if got := detachedPlaintext(t, img[0], img[1], key); !bytes.Equal(got, plain) {
				t.Fatalf("%s %s: data differs from the plaintext at %d", res, img[0], firstDifference(got, plain))
			}
		}
	}
}

// Part-way, luksd's segments are cryptsetup's: luksd stops after a
// number of hotzones, and the metadata has the plain rest linear, the
// encrypted part crypt, bound to the new key as cryptsetup binds it; then
// cryptsetup finishes it.
func TestEncryptDetachedStopAndResume(t *testing.T) {
	const size = 4 << 20
	_, _, mine, mineHdr, plain, key := encryptDetachedPair(t, size)
	initDetached(t, mineHdr, size, ReencryptParams{})
	var done int64
	runDetached(t, mine, mineHdr, ReencryptRun{HotzoneSize: 1 << 20,
		Progress: func(d, _ int64) { done = d },
		Stop:     func() bool { return done >= 2<<20 }})
	const want = `"segments":{"0":{"type":"crypt","offset":"0","size":"2097152","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":512},` +
		`"1":{"type":"linear","offset":"2097152","size":"dynamic"},` +
		`"2":{"type":"linear","offset":"0","size":"dynamic","flags":["backup-previous"]},` +
		`"3":{"type":"crypt","offset":"0","size":"dynamic","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":512,"flags":["backup-final"]}}`
	got := strings.Join(strings.Fields(saltless(t, mineHdr)), "")
	if !strings.Contains(got, want) {
		t.Fatalf("stopped at 2 MiB:\n%s\nwant segments %s", got, want)
	}
	if !strings.Contains(got, `"segments":["3","0"]`) {
		t.Fatalf("new key's digest not bound to backup-final then segment 0:\n%s", got)
	}
	cryptsetup(t, "reencrypt", "--resume-only", "--header", mineHdr, "--force-offline-reencrypt", "-q", "-d", key, mine)
	if got := detachedPlaintext(t, mine, mineHdr, key); !bytes.Equal(got, plain) {
		t.Fatalf("data differs from the plaintext at %d", firstDifference(got, plain))
	}
}
