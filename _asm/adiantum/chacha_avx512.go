package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// chachaAVX512 is ChaCha blocks (16 or 8) blocks at a time with AVX-512,
// on zmm or (AVX-512VL) ymm registers: register i holds state word i of the
// blocks (lane j is block j). Rotations are single VPROLDs, the feed-forward
// adds the input words straight from memory by broadcast, and register 31
// carries the block counters; 16-30 are scratch for the transpose. The
// eight-block kernel serves streams, or their tails, too short for sixteen;
// against the AVX2 one it has no spills and one instruction per rotation.
func chachaAVX512(name string, blocks int) {
	as := asZ
	if blocks == 8 {
		as = asY
	}
	lanes := lanes16()
	step := constWord(blocks)

	TEXT(name, NOSPLIT, chachaSignature)
	loadChaChaArgs()
	w := words(0, as)
	counters := as(Z31)
	VPBROADCASTD(At(RAX, 48), counters)
	VPADDD(lanes, counters, counters)

	Label("group")
	for i := range 16 {
		if i == 12 {
			VMOVDQA32(counters, w[i])
		} else {
			VPBROADCASTD(At(RAX, 4*i), w[i])
		}
	}
	MOVQ(RDX, RBX)

	Label("doubleround")
	xor := func(x, y Register) { VPXORD(x, y, y) }
	rotate := func(r quad, n int) {
		for _, x := range r {
			VPROLD(Imm(uint64(n)), x, x)
		}
	}
	doubleRound(w, [4]int{0, 1, 2, 3}, xor, rotate)
	SUBQ(Imm(2), RBX)
	JNZ(LabelRef("doubleround"))

	for i := range 16 {
		if i == 12 {
			VPADDD(counters, w[i], w[i])
		} else {
			VPADDD_BCST(At(RAX, 4*i), w[i], w[i])
		}
	}
	t := words(16, as)
	for q := range 4 {
		r := quad{w[4*q], w[4*q+1], w[4*q+2], w[4*q+3]}
		transpose4(r, quad{t[4*(q%2)], t[4*(q%2)+1], t[4*(q%2)+2], t[4*(q%2)+3]})
	}
	var wiped []Register
	if blocks == 16 {
		wiped = xorBlocksZ(w)
	} else {
		wiped = xorBlocksY(w)
	}

	VPADDD_BCST(step, counters, counters)
	ADDQ(U32(uint32(64*blocks)), RSI)
	ADDQ(U32(uint32(64*blocks)), RDI)
	DECQ(RCX)
	JNZ(LabelRef("group"))

	Comment("Leave no key stream in the vector registers.")
	for _, r := range append(w[:], wiped...) {
		VPXORD(r, r, r)
	}
	VZEROUPPER()
	RET()
}

// lanes16 is the counter offsets 0..15, one a 32-bit lane, declared once.
var lanes16 = once(func() Mem {
	return Words("lanes16", 0x0000000100000000, 0x0000000300000002, 0x0000000500000004,
		0x0000000700000006, 0x0000000900000008, 0x0000000b0000000a, 0x0000000d0000000c,
		0x0000000f0000000e)
})

// constWord declares the 32-bit word n, for a broadcast.
func constWord(n int) Mem {
	m := GLOBL(map[int]string{16: "sixteen", 8: "eight32"}[n], RODATA|NOPTR)
	DATA(0, U32(uint32(n)))
	return m
}

// once returns f's result, calling f the first time only.
func once[T any](f func() T) func() T {
	var v T
	done := false
	return func() T {
		if !done {
			v, done = f(), true
		}
		return v
	}
}

// xorBlocksZ XORs the sixteen blocks out of the transposed words in w:
// w[k], w[4+k], w[8+k] and w[12+k] hold blocks k, 4+k, 8+k and 12+k (one
// 128-bit lane each) of words 0-3, 4-7, 8-11 and 12-15. It returns the
// scratch registers that held key stream.
func xorBlocksZ(w [16]Register) []Register {
	for k := range 4 {
		a, b, c, d := w[k], w[4+k], w[8+k], w[12+k]
		VSHUFI32X4(Imm(0x44), b, a, Z24)
		VSHUFI32X4(Imm(0xee), b, a, Z25)
		VSHUFI32X4(Imm(0x44), d, c, Z26)
		VSHUFI32X4(Imm(0xee), d, c, Z27)
		VSHUFI32X4(Imm(0x88), Z26, Z24, Z28)
		VSHUFI32X4(Imm(0xdd), Z26, Z24, Z29)
		VSHUFI32X4(Imm(0x88), Z27, Z25, Z30)
		VSHUFI32X4(Imm(0xdd), Z27, Z25, Z24)
		out := quad{Z28, Z29, Z30, Z24}
		for i, r := range out {
			VPXORD(At(RSI, 64*(4*i+k)), r, r)
		}
		for i, r := range out {
			VMOVDQU32(r, At(RDI, 64*(4*i+k)))
		}
	}
	return []Register{Z24, Z28, Z29, Z30}
}

// xorBlocksY XORs the eight blocks out of the transposed words in w: w[b]
// and w[b+4] hold blocks b and b+4 of words 0-3 and 4-7, w[8+b] and w[12+b]
// of words 8-11 and 12-15. It returns the scratch registers.
func xorBlocksY(w [16]Register) []Register {
	for _, off := range []int{0, 32} {
		for b := range 4 {
			lo, hi := w[b+off/4], w[b+4+off/4]
			VSHUFI64X2(Imm(0), hi, lo, Y24)
			VSHUFI64X2(Imm(3), hi, lo, Y25)
			VPXORD(At(RSI, 64*b+off), Y24, Y24)
			VPXORD(At(RSI, 64*(b+4)+off), Y25, Y25)
			VMOVDQU32(Y24, At(RDI, 64*b+off))
			VMOVDQU32(Y25, At(RDI, 64*(b+4)+off))
		}
	}
	return []Register{Y24, Y25}
}
