package adiantum

import (
	"encoding/binary"
	"math/bits"
)

// quarterRound is ChaCha's quarter round on a, b, c, d.
func quarterRound(a, b, c, d uint32) (uint32, uint32, uint32, uint32) {
	a += b
	d = bits.RotateLeft32(d^a, 16)
	c += d
	b = bits.RotateLeft32(b^c, 12)
	a += b
	d = bits.RotateLeft32(d^a, 8)
	c += d
	b = bits.RotateLeft32(b^c, 7)
	return a, b, c, d
}

// permute applies rounds ChaCha rounds (an even number) to x.
func permute(x *[16]uint32, rounds int) {
	x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
		x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15] = rounds16(
		x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
		x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15], rounds)
}

// rounds16 is the ChaCha permutation on sixteen words held in registers.
func rounds16(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 uint32,
	rounds int) (uint32, uint32, uint32, uint32, uint32, uint32, uint32, uint32,
	uint32, uint32, uint32, uint32, uint32, uint32, uint32, uint32) {
	for i := 0; i < rounds; i += 2 {
		x0, x4, x8, x12 = quarterRound(x0, x4, x8, x12)
		x1, x5, x9, x13 = quarterRound(x1, x5, x9, x13)
		x2, x6, x10, x14 = quarterRound(x2, x6, x10, x14)
		x3, x7, x11, x15 = quarterRound(x3, x7, x11, x15)
		x0, x5, x10, x15 = quarterRound(x0, x5, x10, x15)
		x1, x6, x11, x12 = quarterRound(x1, x6, x11, x12)
		x2, x7, x8, x13 = quarterRound(x2, x7, x8, x13)
		x3, x4, x9, x14 = quarterRound(x3, x4, x9, x14)
	}
	return x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15
}

// hchacha turns the state s (constants, key, 16 nonce bytes) into the
// HChaCha subkey, left in s[4:12]: words 0-3 and 12-15 of the permuted state,
// with no feed-forward.
func hchacha(s *[16]uint32, rounds int) {
	x0, x1, x2, x3, _, _, _, _, _, _, _, _, x12, x13, x14, x15 := rounds16(
		s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
		s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15], rounds)
	s[4], s[5], s[6], s[7] = x0, x1, x2, x3
	s[8], s[9], s[10], s[11] = x12, x13, x14, x15
}

// chachaXORGeneric sets dst to src XOR the ChaCha keystream of state s,
// advancing s's 64-bit block counter.
func chachaXORGeneric(s *[16]uint32, dst, src []byte, rounds int) {
	var x [16]uint32
	var ks [chachaBlockBytes]byte
	for len(src) > 0 {
		x = *s
		permute(&x, rounds)
		for i := range x {
			x[i] += s[i]
		}
		s[12]++
		if s[12] == 0 {
			s[13]++
		}
		if len(src) >= chachaBlockBytes {
			d, r := dst[:chachaBlockBytes], src[:chachaBlockBytes]
			for i := 0; i < 16; i++ {
				binary.LittleEndian.PutUint32(d[4*i:], binary.LittleEndian.Uint32(r[4*i:])^x[i])
			}
			dst, src = dst[chachaBlockBytes:], src[chachaBlockBytes:]
			continue
		}
		for i := range x {
			binary.LittleEndian.PutUint32(ks[4*i:], x[i])
		}
		for i := range src {
			dst[i] = src[i] ^ ks[i]
		}
		break
	}
	clear(x[:])
	clear(ks[:])
}
