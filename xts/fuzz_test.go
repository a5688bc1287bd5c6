package xts

import (
	"bytes"
	"testing"
)

// FuzzImpls checks that every impl this machine runs agrees with the
// generic one, and that decryption inverts encryption, for any key, tweak
// and whole-block data unit.
func FuzzImpls(f *testing.F) {
	f.Add(make([]byte, 64), make([]byte, 16), make([]byte, 512))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0x80}, 16), make([]byte, 16*37))
	f.Add(bytes.Repeat([]byte{7}, 48), []byte("0123456789abcdef"), make([]byte, 16*3))
	f.Fuzz(func(t *testing.T, key, tweakBytes, data []byte) {
		if len(key) != 32 && len(key) != 48 && len(key) != 64 {
			return
		}
		var tweak [16]byte
		copy(tweak[:], tweakBytes)
		data = data[:len(data)&^15]
		if len(data) == 0 {
			return
		}
		gen, err := newCipher(key, implGeneric)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(data))
		gen.Encrypt(want, data, &tweak)
		for _, im := range impls() {
			c, _ := newCipher(key, im)
			got := bytes.Clone(data)
			c.Encrypt(got, got, &tweak)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: encrypt differs from generic", im)
			}
			c.Decrypt(got, got, &tweak)
			if !bytes.Equal(got, data) {
				t.Fatalf("%s: decrypt does not invert", im)
			}
		}
	})
}
