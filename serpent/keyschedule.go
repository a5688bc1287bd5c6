package serpent

import (
	"encoding/binary"
	"math/bits"
)

// phi is the fractional part of the golden ratio, the key schedule's
// constant.
const phi = 0x9e3779b9

// expandKey computes the 33 round keys: the key, padded to 256 bits, seeds
// the prekey recurrence w[i] = (w[i-8]^w[i-5]^w[i-3]^w[i-1]^phi^i) <<< 11,
// and round key i is S[(3-i) mod 8] applied to prekeys 4i..4i+3.
func (c *Cipher) expandKey(key []byte) {
	var padded [32]byte
	copy(padded[:], key)
	if len(key) < len(padded) {
		padded[len(key)] = 1
	}
	var w [8 + 4*(rounds+1)]uint32
	for i := range 8 {
		w[i] = binary.LittleEndian.Uint32(padded[4*i:])
	}
	for i := 8; i < len(w); i++ {
		x := w[i-8] ^ w[i-5] ^ w[i-3] ^ w[i-1] ^ phi ^ uint32(i-8)
		w[i] = bits.RotateLeft32(x, 11)
	}
	for i := range rounds + 1 {
		p := w[8+4*i : 12+4*i]
		c.rk[i] = sboxByTable(&sboxes[(3-i)&7], p[0], p[1], p[2], p[3])
	}
	clear(w[:])
	clear(padded[:])
}

// sboxByTable applies S-box s to the 32 nibbles of x0..x3 (bit j of xk is
// bit k of nibble j) by looking each one up: slow, but the key schedule
// runs once per key, and it keeps the S-box circuits in one place, the
// rounds.
func sboxByTable(s *[16]uint8, x0, x1, x2, x3 uint32) [4]uint32 {
	var y [4]uint32
	for j := range 32 {
		n := x0>>j&1 | x1>>j&1<<1 | x2>>j&1<<2 | x3>>j&1<<3
		v := uint32(s[n])
		for k := range 4 {
			y[k] |= v >> k & 1 << j
		}
	}
	return y
}
