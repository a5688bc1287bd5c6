package adiantum

import (
	"bytes"
	"testing"
)

// FuzzAdiantum compares Encrypt with lukechampine.com/adiantum and checks
// that Decrypt inverts it, on every impl this machine runs. The fuzzer picks
// the key, tweak, message and rounds.
func FuzzAdiantum(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, KeySize), make([]byte, TweakSize), make([]byte, 16), false)
	f.Add(bytes.Repeat([]byte{2}, KeySize), plain64(7), make([]byte, 512), true)
	f.Add(bytes.Repeat([]byte{3}, KeySize), plain64(1<<40), bytes.Repeat([]byte{0xff}, 1041), false)
	f.Fuzz(func(t *testing.T, key, tweak, msg []byte, twenty bool) {
		if len(key) < KeySize || len(tweak) < TweakSize || len(msg) < MinSize {
			return
		}
		key, tweak = key[:KeySize], tweak[:TweakSize]
		rounds := 12
		if twenty {
			rounds = 20
		}
		want := referenceCipher(key, rounds).Encrypt(bytes.Clone(msg), tweak)
		for _, im := range impls() {
			c, err := newCipher(key, rounds, im)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			c.Encrypt(got, msg, tweak)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s, rounds %d, %d bytes: differs from lukechampine.com/adiantum", im, rounds, len(msg))
			}
			c.Decrypt(got, got, tweak)
			if !bytes.Equal(got, msg) {
				t.Fatalf("%s, rounds %d, %d bytes: decryption does not invert", im, rounds, len(msg))
			}
		}
	})
}
