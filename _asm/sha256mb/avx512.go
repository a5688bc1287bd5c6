package main

import (
	"slices"

	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// blocks16 is
//
//	func(h *[8][16]uint32, p *byte, stride, n int)
//
// it runs SHA-256's compression over n 64-byte blocks of sixteen messages,
// message j starting at p + j*stride (stride 0 gives every lane the same
// blocks, as the padding block of messages of one length), with the state
// h[i][j] (word i of message j). Word i of the state and word t of the
// message schedule hold that word of all sixteen messages, one per 32-bit
// lane: the rounds are SHA-256's, written once for sixteen.
func blocks16(k Mem) {
	TEXT("blocks16", NOSPLIT, "func(h *[8][16]uint32, p *byte, stride, n int)")
	LoadArgs("h p stride n", RAX, RSI, RDX, RCX)
	state := []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7}
	rows := []VecPhysical{Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23}
	t0, t1, t2, t3 := Z24, Z25, Z26, Z27
	flip, spare := Z28, Z29

	VMOVDQU64(flipMask(), flip)
	for i, s := range state {
		VMOVDQU32(At(RAX, 64*i), s)
	}

	Label("block16")
	// Block of message j into rows[j], then turned so that w[t] holds
	// word t of every message.
	MOVQ(RSI, R8)
	for _, r := range rows {
		VMOVDQU32(At(R8, 0), r)
		VPSHUFB(flip, r, r)
		ADDQ(RDX, R8)
	}
	w := transpose16(rows, spare)
	// The state's names turn each round: a round's new a is in old h's
	// register and its new e in old d's.
	s := state
	for t := range 64 {
		a, b, c, d, e, f, g, h := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
		wt := w[t%16]
		if t >= 16 {
			// W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16]; wt holds W[t-16].
			sigma(w[(t-15)%16], 7, 18, 3, t0, t1, t2)
			VPADDD(t2, wt, wt)
			sigma(w[(t-2)%16], 17, 19, 10, t0, t1, t2)
			VPADDD(t2, wt, wt)
			VPADDD(w[(t-7)%16], wt, wt)
		}
		// T1 = h + Σ1(e) + Ch(e, f, g) + K[t] + W[t], into h.
		VPADDD(wt, h, h)
		VPADDD_BCST(k.Offset(4*t), h, h)
		bigSigma(e, 6, 11, 25, t0, t1, t2)
		VPADDD(t2, h, h)
		VMOVDQA64(e, t3)
		VPTERNLOGD(U8(0xca), g, f, t3) // e ? f : g
		VPADDD(t3, h, h)
		// d + T1 is the new e; T1 + Σ0(a) + Maj(a, b, c) the new a.
		VPADDD(h, d, d)
		bigSigma(a, 2, 13, 22, t0, t1, t2)
		VPADDD(t2, h, h)
		VMOVDQA64(a, t3)
		VPTERNLOGD(U8(0xe8), c, b, t3) // majority
		VPADDD(t3, h, h)
		s = []VecPhysical{h, a, b, c, d, e, f, g}
	}
	for i, s := range state {
		VPADDD(At(RAX, 64*i), s, s)
		VMOVDQU32(s, At(RAX, 64*i))
	}
	ADDQ(Imm(64), RSI)
	DECQ(RCX)
	JNZ(LabelRef("block16"))
	VZEROUPPER()
	RET()
}

// transpose16 turns the 16x16 matrix of words in rows (row j in rows[j])
// into its columns, and returns the registers that hold them, column i
// in the i'th; spare is a free register. Four steps of pairwise shuffles,
// 64 instructions: words within 128-bit lanes, pairs of words, then
// 128-bit lanes twice. Each shuffle of two registers writes its low half
// to the free register and its high half over its second input; the first
// input's register is free after it.
func transpose16(rows []VecPhysical, spare VecPhysical) []VecPhysical {
	free := spare
	// pair sets x to lo(x, y) and y to hi(x, y), in new registers.
	pair := func(x, y *VecPhysical, lo, hi func(b, a, dst Op)) {
		lo(*y, *x, free)
		hi(*y, *x, *y)
		*x, free = free, *x
	}
	lanes := func(imm uint8) func(b, a, dst Op) {
		return func(b, a, dst Op) { VSHUFI32X4(U8(imm), b, a, dst) }
	}
	r := slices.Clone(rows)
	// Lane L of r[2m] then holds words 4L, 4L+1 of messages 2m and
	// 2m+1, interleaved; of r[2m+1] words 4L+2, 4L+3.
	for m := 0; m < 16; m += 2 {
		pair(&r[m], &r[m+1], func(b, a, d Op) { VPUNPCKLDQ(b, a, d) }, func(b, a, d Op) { VPUNPCKHDQ(b, a, d) })
	}
	// t[4q+c]'s lane L then holds word 4L+c of messages 4q to 4q+3.
	t := make([]VecPhysical, 16)
	for q := 0; q < 16; q += 4 {
		for h := range 2 {
			pair(&r[q+h], &r[q+h+2], func(b, a, d Op) { VPUNPCKLQDQ(b, a, d) }, func(b, a, d Op) { VPUNPCKHQDQ(b, a, d) })
			t[q+2*h], t[q+2*h+1] = r[q+h], r[q+h+2]
		}
	}
	// Column 4L+c: lane L of t[c], t[4+c], t[8+c] and t[12+c], a 4x4
	// transpose of lanes.
	cols := make([]VecPhysical, 16)
	for c := range 4 {
		a, b, x, y := t[c], t[4+c], t[8+c], t[12+c]
		pair(&a, &b, lanes(0x44), lanes(0xee))
		pair(&x, &y, lanes(0x44), lanes(0xee))
		pair(&a, &x, lanes(0x88), lanes(0xdd))
		pair(&b, &y, lanes(0x88), lanes(0xdd))
		cols[c], cols[4+c], cols[8+c], cols[12+c] = a, x, b, y
	}
	return cols
}

// bigSigma sets dst to x>>>r1 ^ x>>>r2 ^ x>>>r3 (Σ0 or Σ1) using t0, t1.
func bigSigma(x VecPhysical, r1, r2, r3 uint8, t0, t1, dst VecPhysical) {
	VPRORD(U8(r1), x, t0)
	VPRORD(U8(r2), x, t1)
	VPRORD(U8(r3), x, dst)
	VPTERNLOGD(U8(0x96), t0, t1, dst) // three-way XOR
}

// sigma sets dst to x>>>r1 ^ x>>>r2 ^ x>>s (σ0 or σ1) using t0, t1.
func sigma(x VecPhysical, r1, r2, s uint8, t0, t1, dst VecPhysical) {
	VPRORD(U8(r1), x, t0)
	VPRORD(U8(r2), x, t1)
	VPSRLD(U8(s), x, dst)
	VPTERNLOGD(U8(0x96), t0, t1, dst)
}
