package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AES-NI kernels: eight blocks in X0-X7, their tweaks in a set of
// eight on the stack at R11, while the rounds interleave the computing of
// the next eight into the set at R12. X12 holds the round key, X13 is
// scratch, X14 the mask of mulX and X15 the running tweak.

// mulX multiplies the tweak in t by x in GF(2^128), with tmp as scratch
// and mask from mulxMask: doubling each qword with PADDQ drops bit 63 of
// the low qword (carried into bit 64 by the mask's 1) and bit 127 (folded
// back as 0x87). PSHUFD $0x13 copies dword 3 to lane 0 and dword 1 to lane
// 2, PSRAL turns their sign bits into masks.
func mulX(t, tmp, mask Register) {
	PSHUFD(Imm(0x13), t, tmp)
	PSRAL(Imm(31), tmp)
	PAND(mask, tmp)
	PADDQ(t, t)
	PXOR(tmp, t)
}

// tweakStep saves the running tweak X15 as tweak i of the set at base and
// advances it.
func tweakStep(i int, base Register) {
	MOVOU(X15, At(base, 16*i))
	mulX(X15, X13, X14)
}

// aesniBody runs one direction over one data unit: AX round keys, CX
// rounds, DI dst, SI src, DX blocks, BX the tweak. It leaves DI and SI past
// the unit.
func aesniBody(d direction, frame Mem) {
	blocks := []Register{X0, X1, X2, X3, X4, X5, X6, X7}
	MOVOU(At(RBX, 0), X15)
	MOVQ(RSP, R11) // the frame is at 0(SP)
	LEAQ(frame.Offset(128), R12)
	for i := range 8 {
		tweakStep(i, R11)
	}

	whileAtLeast("loop8", 8, "tail")
	MOVOU(At(RAX, 0), X12)
	for i, x := range blocks {
		MOVOU(At(RSI, 16*i), x)
		MOVOU(At(R11, 16*i), X13)
		PXOR(X13, x)
		PXOR(X12, x)
	}
	LEAQ(At(RAX, 16), R8)
	aesniRounds("rounds8", d, blocks, func(k int) { tweakStep(k, R12) })
	for i, x := range blocks {
		MOVOU(At(R11, 16*i), X13)
		PXOR(X13, x)
		MOVOU(x, At(RDI, 16*i))
	}
	XCHGQ(R11, R12)
	nextBlocks(8)
	JMP(LabelRef("loop8"))

	Label("tail")
	MOVOU(At(R11, 0), X15)
	whileBlocks("loop1")
	MOVOU(At(RSI, 0), X0)
	PXOR(X15, X0)
	MOVOU(At(RAX, 0), X12)
	PXOR(X12, X0)
	LEAQ(At(RAX, 16), R8)
	aesniRounds("rounds1", d, blocks[:1], nil)
	PXOR(X15, X0)
	MOVOU(X0, At(RDI, 0))
	mulX(X15, X13, X14)
	nextBlocks(1)
	JMP(LabelRef("loop1"))
	Label("done")
	MOVOU(X15, At(RBX, 0))
}

// aesniRounds runs the rounds of direction d on the blocks, each round's
// key loaded to X12.
func aesniRounds(label string, d direction, blocks []Register, between func(k int)) {
	round := func(op func(k, x Op), off int) {
		MOVOU(At(R8, off), X12)
		for _, x := range blocks {
			op(X12, x)
		}
	}
	aesRounds(label, func(off int) { round(d.round, off) }, between,
		func() { round(d.last, 144) })
}

// ecbEncrypt encrypts n > 0 independent blocks, one at a time: the blocks
// are independent, so the CPU overlaps the iterations by itself; this is
// for the few tweaks of a call.
func ecbEncrypt() {
	TEXT("ecbEncryptAESNI", NOSPLIT, "func(rk *byte, rounds int, dst, src *byte, n int)")
	LoadArgs("rk rounds dst src n", RAX, RCX, RDI, RSI, RDX)
	Label("next")
	MOVOU(At(RSI, 0), X0)
	MOVOU(At(RAX, 0), X12)
	PXOR(X12, X0)
	LEAQ(At(RAX, 16), R8)
	aesniRounds("rounds", encrypt, []Register{X0}, nil)
	MOVOU(X0, At(RDI, 0))
	ADDQ(Imm(16), RSI)
	ADDQ(Imm(16), RDI)
	DECQ(RDX)
	JNZ(LabelRef("next"))
	RET()
}
