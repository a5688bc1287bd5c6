package adiantum

import (
	"encoding/binary"
	"math/bits"
)

// Poly1305 as Adiantum uses it: the polynomial evaluation modulo 2^130-5 with
// the clamped key r, every block a full 16 bytes with the 2^128 bit set, and
// the result reduced and truncated to 128 bits with no "s" added.

// polyKey is a clamped Poly1305 r.
type polyKey struct{ r0, r1 uint64 }

func (k *polyKey) init(b []byte) {
	k.r0 = binary.LittleEndian.Uint64(b) & 0x0ffffffc0fffffff
	k.r1 = binary.LittleEndian.Uint64(b[8:]) & 0x0ffffffc0ffffffc
}

// polyState is the accumulator h = h0 + h1*2^64 + h2*2^128, kept partially
// reduced (h2 stays small) between blocks.
type polyState struct{ h0, h1, h2 uint64 }

// block absorbs one 16-byte block m0 + m1*2^64 + 2^128.
func (p *polyState) block(k *polyKey, m0, m1 uint64) {
	var c uint64
	h0, c := bits.Add64(p.h0, m0, 0)
	h1, c := bits.Add64(p.h1, m1, c)
	h2 := p.h2 + c + 1

	// h * r, as a 256-bit t0..t3: h0r0 + (h1r0 + h0r1)2^64 +
	// (h1r1 + h2r0)2^128 + h2r1 2^192. r's top bits are clamped and h2 is
	// at most 7, so h2*r0 and h2*r1 fit in 64 bits.
	a0hi, a0lo := bits.Mul64(h0, k.r0)
	a1hi, a1lo := bits.Mul64(h1, k.r0)
	b0hi, b0lo := bits.Mul64(h0, k.r1)
	b1hi, b1lo := bits.Mul64(h1, k.r1)

	t0 := a0lo
	t1, c1 := bits.Add64(a0hi, a1lo, 0)
	t2, c2 := bits.Add64(a1hi, b1lo, c1)
	t3 := b1hi + c2
	t1, c1 = bits.Add64(t1, b0lo, 0)
	t2, c2 = bits.Add64(t2, b0hi, c1)
	t3 += c2
	t2, c2 = bits.Add64(t2, h2*k.r0, 0)
	t3 += h2*k.r1 + c2

	// 2^130 = 5 (mod 2^130-5): fold the bits above 130 back in as 4x + x.
	hi0, hi1 := t2&^3, t3
	h0, c = bits.Add64(t0, hi0, 0)
	h1, c = bits.Add64(t1, hi1, c)
	h2 = t2&3 + c
	hi0, hi1 = hi0>>2|hi1<<62, hi1>>2
	h0, c = bits.Add64(h0, hi0, 0)
	h1, c = bits.Add64(h1, hi1, c)
	h2 += c
	p.h0, p.h1, p.h2 = h0, h1, h2
}

// sum returns h fully reduced modulo 2^130-5, truncated to 128 bits.
func (p *polyState) sum() u128 {
	// h < 2*(2^130-5) here, so one conditional subtraction of p suffices:
	// keep h+5-2^130 when h+5 reaches 2^130. Constant time by masking.
	g0, c := bits.Add64(p.h0, 5, 0)
	g1, c := bits.Add64(p.h1, 0, c)
	g2 := p.h2 + c
	mask := -(g2 >> 2) // all ones when h >= p
	h0 := p.h0 ^ (p.h0^g0)&mask
	h1 := p.h1 ^ (p.h1^g1)&mask
	return u128{h0, h1}
}
