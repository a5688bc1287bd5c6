package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// nh is NH with AVX2, or with AVX-512 eight units at a time first. The
// key's units are stored k0, k2, k1, k3 (see nhKey); the message units are
// shuffled the same way, so after the 32-bit adds each 64-bit lane holds a
// pair NH multiplies: (m0+k0, m2+k2) and (m1+k1, m3+k3). VPMULUDQ of a lane
// with itself shifted right by 32 forms both products. A register carries
// consecutive units; the key for pass p of units j, j+1, ... is the key at
// unit j+p, so every pass is one unaligned load. R8 walks the key, SI the
// message, CX counts the bytes left; Y0-Y3 (Z0-Z3) accumulate the passes.
func nh(name string, avx512 bool) {
	TEXT(name, NOSPLIT, nhSignature)
	LoadArgs("k m n h", R8, RSI, RCX, RDI)

	acc := [4]Register{Y0, Y1, Y2, Y3}
	if avx512 {
		for _, z := range []Register{Z0, Z1, Z2, Z3} {
			VPXORQ(z, z, z)
		}
		Comment("Eight units per iteration as two zmm groups of four.")
		unitLoop("oct", 128, "fold", [4]Register{Z0, Z1, Z2, Z3},
			[2]Register{Z4, Z8}, [4][2]Register{{Z5, Z6}, {Z7, Z9}, {Z10, Z11}, {Z12, Z13}})
		Label("fold")
		Comment("Halve the accumulators to ymm; the VEX code below clears the upper",
			"halves of Z0-Z3 anyway.")
		for i, z := range []Register{Z0, Z1, Z2, Z3} {
			VEXTRACTI64X4(Imm(1), z, Y4)
			VPADDQ(Y4, acc[i], acc[i])
		}
	} else {
		for _, y := range acc {
			VPXOR(y, y, y)
		}
	}

	Comment("Four units per iteration, as two independent pairs.")
	unitLoop("quad", 64, "pair", acc, [2]Register{Y4, Y8}, [4][2]Register{{Y5, Y6}, {Y7, Y9}, {Y5, Y6}, {Y7, Y9}})

	Label("pair")
	CMPQ(RCX, Imm(32))
	JB(LabelRef("single"))
	VMOVDQU(At(RSI, 0), Y4)
	VPSHUFD(Imm(0xd8), Y4, Y4)
	for p := range 4 {
		nhPass(p, Y4, acc[p], Y5, Y6)
	}
	ADDQ(Imm(32), R8)
	ADDQ(Imm(32), RSI)
	SUBQ(Imm(32), RCX)

	Label("single")
	CMPQ(RCX, Imm(16))
	JB(LabelRef("done"))
	Comment("One unit in the low lane; the 128-bit ops zero the high lanes of",
		"the scratch registers, so the full-width adds keep the sums intact.")
	VMOVDQU(At(RSI, 0), X4)
	VPSHUFD(Imm(0xd8), X4, X4)
	for p := range 4 {
		VPADDD(At(R8, 16*p), X4, X5)
		VPSRLQ(Imm(32), X5, X6)
		VPMULUDQ(X6, X5, X5)
		VPADDQ(Y5, acc[p], acc[p])
	}

	Label("done")
	Comment("Sum the four 64-bit lanes of each pass.")
	xs := [4]Register{X0, X1, X2, X3}
	for p, y := range acc {
		VEXTRACTI128(Imm(1), y, X4)
		VPADDQ(X4, xs[p], xs[p])
	}
	for i := range 2 {
		VPUNPCKLQDQ(xs[2*i+1], xs[2*i], X4)
		VPUNPCKHQDQ(xs[2*i+1], xs[2*i], X5)
		VPADDQ(X5, X4, X4)
		VMOVDQU(X4, At(RDI, 16*i))
	}
	VZEROUPPER()
	RET()
}

// unitLoop runs NH over two registers of message units per iteration, step
// bytes in all, while at least step bytes are left, then goes on at exit.
// scratch holds the two scratch registers of each pass.
func unitLoop(label string, step int, exit string, acc [4]Register, msg [2]Register, scratch [4][2]Register) {
	CMPQ(RCX, Imm(uint64(step)))
	JB(LabelRef(exit))
	Label(label)
	for i, m := range msg {
		if m.Size() == 64 {
			VMOVDQU32(At(RSI, step/2*i), m)
		} else {
			VMOVDQU(At(RSI, step/2*i), m)
		}
	}
	for _, m := range msg {
		VPSHUFD(Imm(0xd8), m, m)
	}
	for _, m := range msg {
		for p := range 4 {
			nhPass(p, m, acc[p], scratch[p][0], scratch[p][1])
		}
		ADDQ(Imm(uint64(step/2)), R8)
	}
	ADDQ(Imm(uint64(step)), RSI)
	SUBQ(Imm(uint64(step)), RCX)
	CMPQ(RCX, Imm(uint64(step)))
	JAE(LabelRef(label))
}

// nhPass adds pass p of the (shuffled) units in m into acc, with t and u as
// scratch; R8 points at the key of the first unit.
func nhPass(p int, m, acc, t, u Register) {
	VPADDD(At(R8, 16*p), m, t)
	VPSRLQ(Imm(32), t, u)
	VPMULUDQ(u, t, t)
	VPADDQ(t, acc, acc)
}
