package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The VAES kernels on 256-bit vectors (AVX2), for CPUs with VAES but
// without AVX-512: 16 blocks in flight in Y0-Y7, two per register. The
// tweaks of the current 16 blocks are on the stack at R11 (block k's at
// 16*k), those of the next 16 are computed into R12 between the rounds:
// each pair times x^16, a two-byte shift of each lane with the bits shifted
// out folded back by VPCLMULQDQ with 0x87 (Y14). Y8 holds the round key,
// Y9-Y11 are scratch.

// yMulXShift sets t to the two tweaks in s times x^n, n < 56 (see
// mulXShift).
func yMulXShift(t, s Register, n int) {
	VPSRLQ(Imm(uint64(64-n)), s, Y9)
	VPSLLQ(Imm(uint64(n)), s, t)
	VPCLMULQDQ(Imm(0x01), Y14, Y9, Y10)
	VPSLLDQ(Imm(8), Y9, Y9)
	VPXOR(Y9, t, t)
	VPXOR(Y10, t, t)
}

// yTweakStep sets pair j of the next set to pair j of the current one
// times x^16.
func yTweakStep(j int) {
	VMOVDQU(At(R11, 32*j), Y9)
	VPSRLDQ(Imm(14), Y9, Y10)
	VPSLLDQ(Imm(2), Y9, Y9)
	VPCLMULQDQ(Imm(0x00), Y14, Y10, Y11)
	VPXOR(Y11, Y9, Y9)
	VMOVDQU(Y9, At(R12, 32*j))
}

// vaes256Body runs one direction over one data unit, registers as for
// aesniBody.
func vaes256Body(d direction, frame Mem) {
	pairs := []Register{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	MOVQ(RSP, R11) // the frame is at 0(SP)
	LEAQ(frame.Offset(256), R12)
	VBROADCASTI128(poly, Y14)
	VMOVDQU(mulxMask, X13)
	VMOVDQU(At(RBX, 0), X0)
	VMOVDQU(X0, X1)
	// X1 = X0 times x, as mulX does.
	VPSHUFD(Imm(0x13), X1, X9)
	VPSRAD(Imm(31), X9, X9)
	VPAND(X13, X9, X9)
	VPADDQ(X1, X1, X1)
	VPXOR(X9, X1, X1)
	VINSERTI128(Imm(1), X1, Y0, Y0)
	VMOVDQU(Y0, At(R11, 0))
	for j := 1; j < 8; j++ {
		yMulXShift(pairs[j], Y0, 2*j)
		VMOVDQU(pairs[j], At(R11, 32*j))
	}

	whileAtLeast("loop16", 16, "tail")
	VBROADCASTI128(At(RAX, 0), Y8)
	for j, y := range pairs {
		VMOVDQU(At(RSI, 32*j), y)
		VPXOR(At(R11, 32*j), y, y)
		VPXOR(Y8, y, y)
	}
	LEAQ(At(RAX, 16), R8)
	aesRounds("rounds16", func(off int) {
		VBROADCASTI128(At(R8, off), Y8)
		for _, y := range pairs {
			d.vround(Y8, y, y)
		}
	}, yTweakStep, func() { VBROADCASTI128(At(R8, 144), Y8) })
	for j, y := range pairs {
		d.vlast(Y8, y, y)
		VPXOR(At(R11, 32*j), y, y)
		VMOVDQU(y, At(RDI, 32*j))
	}
	XCHGQ(R11, R12)
	nextBlocks(16)
	JMP(LabelRef("loop16"))

	Label("tail")
	XORQ(R13, R13)
	whileBlocks("loop1")
	tweak := Mem{Base: R11, Index: R13, Scale: 1}
	VMOVDQU(At(RSI, 0), X0)
	VPXOR(tweak, X0, X0)
	VPXOR(At(RAX, 0), X0, X0)
	LEAQ(At(RAX, 16), R8)
	round := func(op func(k, x, y Op), off int) {
		VMOVDQU(At(R8, off), X8)
		op(X8, X0, X0)
	}
	aesRounds("rounds1", func(off int) { round(d.vround, off) }, nil,
		func() { round(d.vlast, 144) })
	VPXOR(tweak, X0, X0)
	VMOVDQU(X0, At(RDI, 0))
	ADDQ(Imm(16), R13)
	nextBlocks(1)
	JMP(LabelRef("loop1"))
	Label("done")
	VMOVDQU(tweak, X0)
	VMOVDQU(X0, At(RBX, 0))
}
