package dmcrypt

import (
	"bytes"
	"errors"
	mrand "math/rand/v2"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// A segmented Device is what dm-crypt's table of two crypt targets reads:
// [0, split) with the new key, cipher and sector size at the data offset,
// the rest with the old ones, IVs counted from the start of the data
// (iv_tweak = the segment's plaintext offset / 512).
func TestSegmentedMatchesPerSegmentCiphers(t *testing.T) {
	const dataOff, split, total = 1 << 20, 3 << 16, 1 << 19
	m := devtest.NewMem(dataOff + total)
	newKey, oldKey := randBytes(t, 32), randBytes(t, 64)
	mk := func(spec string, key []byte) SectorCipher {
		c, err := New(spec, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d, err := NewSegmented(m, []Segment{
		{Cipher: mk("aes-xts-plain64", newKey), Offset: dataOff, Size: split, SectorSize: 4096},
		{Cipher: mk("aes-cbc-essiv:sha256", oldKey[:32]), Offset: dataOff + split, SectorSize: 512, IVOffset: split / 512},
	}, DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Size() != total || d.BlockSize() != 4096 || d.Segments() != 2 {
		t.Fatalf("size %d, block size %d, %d segments", d.Size(), d.BlockSize(), d.Segments())
	}
	model := make([]byte, total)
	if err := d.WriteZeroes(0, total); err != nil {
		t.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := range 200 {
		// Around the boundary more often than not, sub-sector too.
		off := rng.Int64N(total)
		if i%2 == 0 {
			off = max(0, split-rng.Int64N(9000))
		}
		n := min(rng.Int64N(20000)+1, total-off)
		p := randBytes(t, int(n))
		if _, err := d.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
		copy(model[off:], p)
	}
	// The NBD server's in-place path, whole sectors across the boundary.
	p := randBytes(t, 3*4096)
	if _, err := d.WriteAtScratch(bytes.Clone(p), split-4096); err != nil {
		t.Fatal(err)
	}
	copy(model[split-4096:], p)
	if err := d.WriteZeroes(split-700, 1400); err != nil {
		t.Fatal(err)
	}
	clear(model[split-700 : split+700])
	got := make([]byte, total)
	if _, err := d.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		i := 0
		for got[i] == model[i] {
			i++
		}
		t.Fatalf("segmented read differs from what was written at %d", i)
	}
	// The ciphertext, decrypted segment by segment as dm-crypt would.
	raw := bytes.Clone(m.Bytes()[dataOff:])
	mk("aes-xts-plain64", newKey).Decrypt(raw[:split], 0, 4096)
	mk("aes-cbc-essiv:sha256", oldKey[:32]).Decrypt(raw[split:], split/512, 512)
	if !bytes.Equal(raw, model) {
		t.Fatal("ciphertext is not each segment's cipher over its region")
	}
	if err := d.Suspend(); !errors.Is(err, ErrSegmented) {
		t.Fatalf("Suspend: %v, want ErrSegmented", err)
	}
	if err := d.Resize(total - 4096); !errors.Is(err, ErrSegmentedResize) || d.Size() != total {
		t.Fatalf("Resize: %v, size %d; want ErrSegmentedResize and %d", err, d.Size(), total)
	}
}

func TestSegmentedRefusesDynamicMiddle(t *testing.T) {
	m := devtest.NewMem(1 << 20)
	c1, _ := New("aes-xts-plain64", randBytes(t, 64))
	c2, _ := New("aes-xts-plain64", randBytes(t, 64))
	if _, err := NewSegmented(m, []Segment{{Cipher: c1, SectorSize: 512}, {Cipher: c2, Offset: 4096, SectorSize: 512}}, DeviceOptions{}); err == nil {
		t.Fatal("a dynamic segment before the last was accepted")
	}
}
