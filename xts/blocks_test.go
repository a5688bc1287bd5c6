package xts

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"testing"

	"github.com/luksd/luksd/serpent"
	xxts "golang.org/x/crypto/xts"
)

// TestFromBlocksVectors runs the IEEE 1619 vectors through
// NewCipherFromBlocks with crypto/aes.
func TestFromBlocksVectors(t *testing.T) {
	for _, v := range ieee1619Vectors {
		key := unhex(t, v.key)
		d, _ := aes.NewCipher(key[:len(key)/2])
		tw, _ := aes.NewCipher(key[len(key)/2:])
		c, err := NewCipherFromBlocks(d, tw)
		if err != nil {
			t.Fatal(err)
		}
		tweak := [16]byte(unhex(t, v.tweak))
		ptx := pattern512()
		if v.ptx != "" {
			ptx = unhex(t, v.ptx)
		}
		got := make([]byte, len(ptx))
		c.Encrypt(got, ptx, &tweak)
		if want := unhex(t, v.ctx); !bytes.Equal(got, want) {
			t.Errorf("%s: encrypt\n got %x\nwant %x", v.name, got, want)
		}
		c.Decrypt(got, got, &tweak)
		if !bytes.Equal(got, ptx) {
			t.Errorf("%s: decrypt does not invert", v.name)
		}
	}
	if _, err := NewCipherFromBlocks(fakeBlock{}, fakeBlock{}); err == nil {
		t.Error("a cipher with 8-byte blocks was accepted")
	}
}

type fakeBlock struct{ cipher.Block }

func (fakeBlock) BlockSize() int { return 8 }

// TestFromBlocksSerpent compares EncryptSectors over Serpent with
// golang.org/x/crypto/xts, sector by sector, checks that it does not
// allocate, and that Wipe reaches the Serpent round keys.
func TestFromBlocksSerpent(t *testing.T) {
	key := bytes.Repeat([]byte{0x3c, 0xa5}, 32)
	d, _ := serpent.NewCipher(key[:32])
	tw, _ := serpent.NewCipher(key[32:])
	c, err := NewCipherFromBlocks(d, tw)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := xxts.NewCipher(func(k []byte) (cipher.Block, error) { return serpent.NewCipher(k) }, key)
	buf := pattern512()
	buf = append(buf, buf...)
	want := make([]byte, len(buf))
	for i := 0; i < len(buf); i += 512 {
		ref.Encrypt(want[i:i+512], buf[i:i+512], uint64(7+i/512))
	}
	c.EncryptSectors(buf, 512, 7, 1)
	if !bytes.Equal(buf, want) {
		t.Fatal("EncryptSectors over Serpent differs from x/crypto/xts")
	}
	if n := testing.AllocsPerRun(20, func() { c.DecryptSectors(buf, 512, 7, 1) }); n != 0 {
		t.Errorf("DecryptSectors allocates %v times per call", n)
	}
	c.Wipe()
	var zero [16]byte
	d.Encrypt(buf[:16], zero[:])
	z, _ := serpent.NewCipher(nil)
	z.Wipe()
	z.Encrypt(buf[16:32], zero[:])
	if !bytes.Equal(buf[:16], buf[16:32]) {
		t.Error("Wipe left the Serpent round keys")
	}
}
