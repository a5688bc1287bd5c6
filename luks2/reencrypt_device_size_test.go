package luks2

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/dmcrypt"
)

// dataWith decrypts the data segment of img (header attached) from off
// on with key vk.
func dataWith(t *testing.T, img string, vk []byte, off int64) []byte {
	t.Helper()
	h, _ := readHdr(t, img)
	seg, err := h.Segment()
	mustNil(t, err)
	b, err := os.ReadFile(img)
	mustNil(t, err)
	b = b[seg.Offset+off:]
	sc, err := dmcrypt.New(seg.Cipher, vk)
	mustNil(t, err)
	sc.Decrypt(b, uint64(off/512), seg.SectorSize)
	return b
}

// reencrypt --device-size: only the first SIZE bytes of data are
// rewritten, the old part after a hotzone has a fixed size as in
// cryptsetup's run, the header at the end is cryptsetup's, and the data
// past SIZE is left in the old key.
func TestReencryptDeviceSizeLikeCryptsetup(t *testing.T) {
	const part = 2 << 20
	img, key := reencImage(t)
	oldVK := cryptsetupVolumeKey(t, img, key)
	plain := dataWith(t, img, oldVK, 0)
	cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, img)
	theirs := copyImage(t, img)
	cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--resume-only", "--device-size", "2M", "--key-file", key, theirs)

	h, f := readHdr(t, img)
	size := f.Size()
	var done int64
	run := ReencryptRun{DeviceSize: part, HotzoneSize: 1 << 20,
		Progress: func(d, _ int64) { done = d }, Stop: func() bool { return done >= 1<<20 }}
	mustNil(t, h.Reencrypt(f, size, []byte("pw"), -1, run))
	got := strings.Join(strings.Fields(saltless(t, img)), "")
	if want := `"1":{"type":"crypt","offset":"17825792","size":"1048576","iv_tweak":"2048"`; !strings.Contains(got, want) {
		t.Fatalf("stopped after 1 MiB of 2: no fixed-size old segment %s in\n%s", want, got)
	}
	h, f = readHdr(t, img)
	run.Stop = nil
	mustNil(t, h.Reencrypt(f, size, []byte("pw"), -1, run))
	if a, b := saltless(t, theirs), saltless(t, img); a != b {
		t.Fatalf("end:\ncryptsetup %s\nluksd      %s", a, b)
	}
	newVK := cryptsetupVolumeKey(t, img, key)
	if got := dataWith(t, img, newVK, 0)[:part]; !bytes.Equal(got, plain[:part]) {
		t.Fatalf("first %d bytes: differ at %d", part, firstDifference(got, plain[:part]))
	}
	if got := dataWith(t, img, oldVK, part); !bytes.Equal(got, plain[part:]) {
		t.Fatalf("past %d bytes: not left in the old key (differ at %d)", part, firstDifference(got, plain[part:]))
	}
}

// A DeviceSize that is not a whole number of the segments' sectors is
// refused before anything is written (it once ran into an index out of
// range on a 4096-byte-sector volume).
func TestReencryptDeviceSizeOffSectorRefused(t *testing.T) {
	img, key := reencImage(t, "--sector-size", "4096")
	cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, img)
	before, err := os.ReadFile(img)
	mustNil(t, err)
	h, f := readHdr(t, img)
	for _, n := range []int64{6144, 512, 4096 + 512} {
		err := h.Reencrypt(f, f.Size(), []byte("pw"), -1, ReencryptRun{DeviceSize: n, HotzoneSize: 1 << 20})
		if !errors.Is(err, ErrIllegalDeviceSize) {
			t.Errorf("DeviceSize %d: %v, want ErrIllegalDeviceSize", n, err)
		}
	}
	after, err := os.ReadFile(img)
	mustNil(t, err)
	if !bytes.Equal(before, after) {
		t.Fatalf("refused runs changed the image at %d", firstDifference(before, after))
	}
}
