package argon2

import "math/bits"

// compressGeneric is G in portable Go (RFC 9106, 3.5): R = x ^ y, the
// permutation P on each row of eight 16-byte registers, then on each
// column, and the result XORed with R.
func compressGeneric(out, x, y *block, xor bool) {
	var r, q block
	for i := range r {
		r[i] = x[i] ^ y[i]
	}
	q = r
	for row := range 8 {
		permute((*[16]uint64)(q[16*row:]))
	}
	for col := range 8 {
		// Column col is the words 2col and 2col+1 of each row.
		var v [16]uint64
		for row := range 8 {
			v[2*row], v[2*row+1] = q[16*row+2*col], q[16*row+2*col+1]
		}
		permute(&v)
		for row := range 8 {
			q[16*row+2*col], q[16*row+2*col+1] = v[2*row], v[2*row+1]
		}
	}
	if xor {
		for i := range out {
			out[i] ^= q[i] ^ r[i]
		}
	} else {
		for i := range out {
			out[i] = q[i] ^ r[i]
		}
	}
}

// permute is P on sixteen words: the BLAKE2b round with GB in place of G,
// on the columns (v0, v4, v8, v12), ... then on the diagonals (v0, v5,
// v10, v15), ...
func permute(v *[16]uint64) {
	v[0], v[4], v[8], v[12] = gb(v[0], v[4], v[8], v[12])
	v[1], v[5], v[9], v[13] = gb(v[1], v[5], v[9], v[13])
	v[2], v[6], v[10], v[14] = gb(v[2], v[6], v[10], v[14])
	v[3], v[7], v[11], v[15] = gb(v[3], v[7], v[11], v[15])
	v[0], v[5], v[10], v[15] = gb(v[0], v[5], v[10], v[15])
	v[1], v[6], v[11], v[12] = gb(v[1], v[6], v[11], v[12])
	v[2], v[7], v[8], v[13] = gb(v[2], v[7], v[8], v[13])
	v[3], v[4], v[9], v[14] = gb(v[3], v[4], v[9], v[14])
}

// gb is BLAKE2b's G with each addition a+b replaced by BlaMka's
// a + b + 2*lo(a)*lo(b), lo the low 32 bits.
func gb(a, b, c, d uint64) (uint64, uint64, uint64, uint64) {
	a = blamka(a, b)
	d = bits.RotateLeft64(d^a, -32)
	c = blamka(c, d)
	b = bits.RotateLeft64(b^c, -24)
	a = blamka(a, b)
	d = bits.RotateLeft64(d^a, -16)
	c = blamka(c, d)
	b = bits.RotateLeft64(b^c, -63)
	return a, b, c, d
}

func blamka(a, b uint64) uint64 {
	return a + b + 2*uint64(uint32(a))*uint64(uint32(b))
}
