package luks2

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/dmcrypt"
)

// detachedVolume is a size-byte data image with its detached header,
// formatted by cryptsetup, twice (theirs, mine), and the plaintext.
func detachedVolume(t *testing.T, size int64) (theirs, theirsHdr, mine, mineHdr string, plain []byte, key string) {
	t.Helper()
	theirs, theirsHdr, mine, mineHdr, _, key = encryptDetachedPair(t, size)
	cryptsetup(t, "luksFormat", "-q", "--header", theirsHdr, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--uuid", encUUID, "-d", key, theirs)
	copyTo(t, theirsHdr, mineHdr)
	plain, err := os.ReadFile(theirs)
	mustNil(t, err)
	h, _ := readHdr(t, theirsHdr)
	seg, err := h.Segment()
	mustNil(t, err)
	sc, err := dmcrypt.New(seg.Cipher, cryptsetupVolumeKey(t, theirsHdr, key))
	mustNil(t, err)
	sc.Decrypt(plain, 0, seg.SectorSize)
	return theirs, theirsHdr, mine, mineHdr, plain, key
}

func initDecryptDetached(t *testing.T, hdr string, size int64, p ReencryptParams) {
	t.Helper()
	h, f := readHdr(t, hdr)
	mustNil(t, h.DecryptInitDetached(f, size, []byte("pw"), -1, p, 4096))
}

// luksd's --decrypt --header of a detached-header volume writes the
// metadata cryptsetup writes, after --init-only and at the end, for each
// resilience mode; each tool finishes the other's and the data is the
// plaintext at offset 0.
func TestDecryptDetachedLikeCryptsetup(t *testing.T) {
	const size = 4 << 20
	for _, res := range []string{"checksum", "journal"} { // none: the same metadata path
		theirs, theirsHdr, mine, mineHdr, plain, key := detachedVolume(t, size)
		cryptsetup(t, "reencrypt", "--decrypt", "--init-only", "--header", theirsHdr, "--force-offline-reencrypt", "-q",
			"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--resilience", res, "-d", key, theirs)
		initDecryptDetached(t, mineHdr, size, ReencryptParams{Resilience: res})
		// cryptsetup benchmarks the reencryption digest's PBKDF2 here,
		// whatever the options: iteration counts blanked too.
		if a, b := decryptless(t, theirsHdr), decryptless(t, mineHdr); a != b {
			t.Fatalf("%s init:\ncryptsetup %s\nluksd      %s", res, a, b)
		}
		runDetached(t, theirs, theirsHdr, ReencryptRun{HotzoneSize: 1 << 20})
		cryptsetup(t, "reencrypt", "--resume-only", "--header", mineHdr, "--force-offline-reencrypt", "-q", "-d", key, mine)
		if a, b := saltless(t, theirsHdr), saltless(t, mineHdr); a != b {
			t.Fatalf("%s end:\ncryptsetup %s\nluksd      %s", res, a, b)
		}
		for _, img := range []string{theirs, mine} {
			got, err := os.ReadFile(img)
			mustNil(t, err)
			if !bytes.Equal(got, plain) {
				t.Fatalf("%s %s: data differs from the plaintext at %d", res, img, firstDifference(got, plain))
			}
		}
	}
}

// Part-way, luksd's segments are cryptsetup's (as cryptsetup killed after
// two hotzones leaves them): the front still encrypted, the end plain;
// then cryptsetup finishes it.
func TestDecryptDetachedStopAndResume(t *testing.T) {
	const size = 4 << 20
	_, _, mine, mineHdr, plain, key := detachedVolume(t, size)
	initDecryptDetached(t, mineHdr, size, ReencryptParams{})
	var done int64
	runDetached(t, mine, mineHdr, ReencryptRun{HotzoneSize: 1 << 20,
		Progress: func(d, _ int64) { done = d },
		Stop:     func() bool { return done >= 2<<20 }})
	const want = `"segments":{"0":{"type":"crypt","offset":"0","size":"2097152","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":4096},` +
		`"1":{"type":"linear","offset":"2097152","size":"dynamic"},` +
		`"2":{"type":"crypt","offset":"0","size":"dynamic","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":4096,"flags":["backup-previous"]},` +
		`"3":{"type":"linear","offset":"0","size":"dynamic","flags":["backup-final"]}}`
	got := strings.Join(strings.Fields(saltless(t, mineHdr)), "")
	if !strings.Contains(got, want) {
		t.Fatalf("stopped at 2 MiB:\n%s\nwant segments %s", got, want)
	}
	if !strings.Contains(got, `"segments":["2","0"]`) {
		t.Fatalf("old key's digest not bound to backup-previous then segment 0:\n%s", got)
	}
	cryptsetup(t, "reencrypt", "--resume-only", "--header", mineHdr, "--force-offline-reencrypt", "-q", "-d", key, mine)
	got2, err := os.ReadFile(mine)
	mustNil(t, err)
	if !bytes.Equal(got2, plain) {
		t.Fatalf("data differs from the plaintext at %d", firstDifference(got2, plain))
	}
}
