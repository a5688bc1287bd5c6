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
		var k [4]uint32
		switch (3 - i) & 7 {
		case 0:
			k[0], k[1], k[2], k[3] = sbox0(p[0], p[1], p[2], p[3])
		case 1:
			k[0], k[1], k[2], k[3] = sbox1(p[0], p[1], p[2], p[3])
		case 2:
			k[0], k[1], k[2], k[3] = sbox2(p[0], p[1], p[2], p[3])
		case 3:
			k[0], k[1], k[2], k[3] = sbox3(p[0], p[1], p[2], p[3])
		case 4:
			k[0], k[1], k[2], k[3] = sbox4(p[0], p[1], p[2], p[3])
		case 5:
			k[0], k[1], k[2], k[3] = sbox5(p[0], p[1], p[2], p[3])
		case 6:
			k[0], k[1], k[2], k[3] = sbox6(p[0], p[1], p[2], p[3])
		default:
			k[0], k[1], k[2], k[3] = sbox7(p[0], p[1], p[2], p[3])
		}
		c.rk[i] = k
	}
	clear(w[:])
	clear(padded[:])
}
