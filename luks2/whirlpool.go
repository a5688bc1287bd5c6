package luks2

import (
	"encoding/binary"
	"hash"
)

// Whirlpool (ISO/IEC 10118-3, the final "Whirlpool" version), which old
// LUKS1 headers use as their hash. It is written from the specification:
// a 512-bit block cipher W over an 8x8 byte state in GF(2^8) (polynomial
// x^8+x^4+x^3+x^2+1), ten rounds of S-box, column shift, row mixing by the
// circulant matrix cir(1,1,4,1,8,5,2,9) and key addition, used in
// Miyaguchi-Preneel mode. Speed is no concern: LUKS1 only hashes a few
// thousand short blocks per unlock.

const (
	whirlpoolSize      = 64
	whirlpoolBlockSize = 64
	whirlpoolRounds    = 10
)

var (
	wpSbox [256]byte
	// wpT[m][x] is row mixing θ applied to S-box output of x sitting in
	// column m: the eight products circ[(j-m) mod 8]*S[x], byte j big-endian.
	wpT    [8][256]uint64
	wpRC   [whirlpoolRounds + 1]uint64
	wpCirc = [8]byte{1, 1, 4, 1, 8, 5, 2, 9}
)

func init() {
	e := [16]byte{0x1, 0xB, 0x9, 0xC, 0xD, 0x6, 0xF, 0x3, 0xE, 0x8, 0x7, 0x4, 0xA, 0x2, 0x5, 0x0}
	r := [16]byte{0x7, 0xC, 0xB, 0xD, 0xE, 0x4, 0x9, 0xF, 0x6, 0x3, 0x8, 0xA, 0x2, 0x5, 0x1, 0x0}
	var einv [16]byte
	for i, v := range e {
		einv[v] = byte(i)
	}
	for u := 0; u < 256; u++ {
		hi, lo := e[u>>4], einv[u&0xf]
		t := r[hi^lo]
		wpSbox[u] = e[hi^t]<<4 | einv[lo^t]
	}
	for m := 0; m < 8; m++ {
		for x := 0; x < 256; x++ {
			var row uint64
			for j := 0; j < 8; j++ {
				row |= uint64(gfMul(wpCirc[(j-m+8)%8], wpSbox[x])) << (56 - 8*j)
			}
			wpT[m][x] = row
		}
	}
	for round := 1; round <= whirlpoolRounds; round++ {
		wpRC[round] = binary.BigEndian.Uint64(wpSbox[8*(round-1):])
	}
}

// gfMul multiplies in GF(2^8) modulo x^8+x^4+x^3+x^2+1 (0x11d).
func gfMul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1d
		}
		b >>= 1
	}
	return p
}

// wpState holds the 8x8 byte matrix as eight rows, byte (i, j) being byte
// j (big-endian) of row i.
type wpState [8]uint64

// round applies γ (S-box), π (column m moves down m rows), θ (rows times
// the circulant matrix) and σ (XOR with key k): row i of the result mixes
// element (i-m, m) of the input for each column m.
func (s *wpState) round(k *wpState) {
	var t wpState
	for i := 0; i < 8; i++ {
		v := k[i]
		for m := 0; m < 8; m++ {
			v ^= wpT[m][byte(s[(i-m+8)%8]>>(56-8*m))]
		}
		t[i] = v
	}
	*s = t
}

// compress runs one Miyaguchi-Preneel step: h = W_h(m) ^ h ^ m.
func (h *wpState) compress(block []byte) {
	var m, st wpState
	key := *h
	for i := range m {
		m[i] = binary.BigEndian.Uint64(block[8*i:])
		st[i] = m[i] ^ key[i]
	}
	for round := 1; round <= whirlpoolRounds; round++ {
		rc := wpState{wpRC[round]}
		key.round(&rc)
		st.round(&key)
	}
	for i := range h {
		h[i] ^= st[i] ^ m[i]
	}
}

type whirlpool struct {
	h   wpState
	buf [whirlpoolBlockSize]byte
	n   int
	len uint64 // bytes hashed
}

func newWhirlpool() hash.Hash { return &whirlpool{} }

func (w *whirlpool) Size() int      { return whirlpoolSize }
func (w *whirlpool) BlockSize() int { return whirlpoolBlockSize }
func (w *whirlpool) Reset()         { *w = whirlpool{} }

func (w *whirlpool) Write(p []byte) (int, error) {
	n := len(p)
	w.len += uint64(n)
	for len(p) > 0 {
		c := copy(w.buf[w.n:], p)
		w.n += c
		p = p[c:]
		if w.n == whirlpoolBlockSize {
			w.h.compress(w.buf[:])
			w.n = 0
		}
	}
	return n, nil
}

// Sum pads with a 1 bit, zeros up to 32 bytes before a block end, and the
// message length in bits as a 256-bit big-endian number.
func (w *whirlpool) Sum(in []byte) []byte {
	d := *w
	bits := d.len * 8
	pad := make([]byte, 0, 2*whirlpoolBlockSize)
	pad = append(pad, 0x80)
	for (d.n+len(pad))%whirlpoolBlockSize != 32 {
		pad = append(pad, 0)
	}
	var length [32]byte
	binary.BigEndian.PutUint64(length[24:], bits)
	d.Write(pad)
	d.Write(length[:])
	for _, row := range d.h {
		in = binary.BigEndian.AppendUint64(in, row)
	}
	return in
}
