package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The VAES kernels on 512-bit vectors (AVX-512): 32 blocks (eight vectors
// of four) in flight in Z0-Z7, their tweaks in Z8-Z15 (Z8's lane 0 the next
// block's), Z16 the round key and Z17 the polynomial in every lane.

// zmm lists the vector registers by number.
var zmm = [32]VecPhysical{
	Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31,
}

// zregs returns n registers numbered from first.
func zregs(first, n int) []Register {
	r := make([]Register, n)
	for i := range r {
		r[i] = zmm[first+i]
	}
	return r
}

// mulXShift sets t to the four tweaks in s times x^n (n < 56): each 128-bit
// lane is shifted left by n, the bits carried out of the low qword move to
// the high one, and those out of the high qword are folded back as their
// carry-less product with 0x87 (Z17). t1, t2 are scratch.
func mulXShift(t, s Register, n int, t1, t2 Register) {
	VPSRLQ(Imm(uint64(64-n)), s, t1)
	VPSLLQ(Imm(uint64(n)), s, t)
	VPCLMULQDQ(Imm(0x01), Z17, t1, t2)
	VPSLLDQ(Imm(8), t1, t1)
	VPTERNLOGD(Imm(0x96), t1, t2, t)
}

// mulXBytes sets t to the tweaks in s times x^(8b), b < 8: whole-byte
// shifts of each 128-bit lane, which run beside the AES rounds rather than
// on the port the bit shifts share with them.
func mulXBytes(t, s Register, b int, t1, t2 Register) {
	VPSRLDQ(Imm(uint64(16-b)), s, t1)
	VPSLLDQ(Imm(uint64(b)), s, t)
	VPCLMULQDQ(Imm(0x00), Z17, t1, t2)
	VPXORD(t2, t, t)
}

// tweaks32 sets t[0..7] to the tweaks of 32 blocks from the tweak at mem:
// four copies multiplied lane by lane by 1, x, x^2, x^3 (the shift counts
// shr and shl, registers or shiftRight and shiftLeft, which are then loaded
// into the scratch registers), then the other vectors from the first two by
// x^4, x^8, x^16 and x^24. scratch(i) are the two scratch registers for
// t[i].
func tweaks32(mem Mem, t []Register, shr, shl Op, scratch func(i int) (Register, Register)) {
	VBROADCASTI32X4(mem, t[0])
	t1, t2 := scratch(0)
	if m, ok := shr.(Mem); ok {
		VMOVDQU64(m, t1)
		shr = t1
	}
	VPSRLVQ(shr, t[0], t1)
	if m, ok := shl.(Mem); ok {
		VMOVDQU64(m, t2)
		shl = t2
	}
	VPSLLVQ(shl, t[0], t[0])
	VPCLMULQDQ(Imm(0x01), Z17, t1, t2)
	VPSLLDQ(Imm(8), t1, t1)
	VPTERNLOGD(Imm(0x96), t1, t2, t[0])
	t1, t2 = scratch(1)
	mulXShift(t[1], t[0], 4, t1, t2)
	for i := 2; i < 8; i++ {
		t1, t2 = scratch(i)
		mulXBytes(t[i], t[i%2], i/2, t1, t2)
	}
}

// zload loads the four blocks at off(SI) into x and whitens them with
// their tweaks t and round key 0 (Z16).
func zload(off int, x, t Register) {
	VMOVDQU64(At(RSI, off), x)
	VPTERNLOGD(Imm(0x96), Z16, t, x)
}

// zlast does the last round with the round key in Z16 merged with the
// tweaks t (the last round ends by adding its key), and stores the blocks.
func zlast(d direction, off int, x, t, tmp Register) {
	VPXORD(t, Z16, tmp)
	d.vlast(tmp, x, x)
	VMOVDQU64(x, At(RDI, off))
}

// zrounds runs all but the last round on the blocks and leaves the last
// round key in Z16.
func zrounds(label string, d direction, blocks []Register) {
	aesRounds(label, func(off int) {
		VBROADCASTI32X4(At(R8, off), Z16)
		for _, x := range blocks {
			d.vround(Z16, x, x)
		}
	}, nil, func() { VBROADCASTI32X4(At(R8, 144), Z16) })
}

// vaes512Body runs one direction over one data unit of a multiple of four
// blocks, registers as for aesniBody: 32 blocks in flight, then four at a
// time.
func vaes512Body(d direction) {
	blocks, tweaks := zregs(0, 8), zregs(8, 8)
	tweaks32(At(RBX, 0), tweaks, shiftRight, shiftLeft, func(i int) (Register, Register) {
		return zmm[16+2*max(i, 1)], zmm[17+2*max(i, 1)]
	})

	whileAtLeast("loop32", 32, "loop4")
	VBROADCASTI32X4(At(RAX, 0), Z16)
	for i := range 8 {
		zload(64*i, blocks[i], tweaks[i])
	}
	LEAQ(At(RAX, 16), R8)
	zrounds("rounds32", d, blocks)
	for i := range 8 {
		zlast(d, 64*i, blocks[i], tweaks[i], zmm[18+i])
	}
	nextBlocks(32)
	// The next 32 tweaks are these times x^32; the first vector is needed
	// whether or not 32 blocks are left.
	scratch := [][2]Register{{Z26, Z27}, {Z28, Z29}, {Z30, Z31}}
	mulXBytes(Z8, Z8, 4, Z26, Z27)
	CMPQ(RDX, Imm(32))
	JB(LabelRef("loop4"))
	for i := 1; i < 8; i++ {
		s := scratch[i%3]
		mulXBytes(tweaks[i], tweaks[i], 4, s[0], s[1])
	}
	JMP(LabelRef("loop32"))

	whileBlocks("loop4")
	VBROADCASTI32X4(At(RAX, 0), Z16)
	zload(0, Z0, Z8)
	LEAQ(At(RAX, 16), R8)
	zrounds("rounds4", d, blocks[:1])
	zlast(d, 0, Z0, Z8, Z18)
	mulXShift(Z8, Z8, 4, Z26, Z27)
	nextBlocks(4)
	JMP(LabelRef("loop4"))
	Label("done")
	VMOVDQU(X8, At(RBX, 0))
}

// vaes512Sectors512 runs whole 512-byte sectors: AX round keys, CX rounds,
// DI the sectors, R9 how many, BX their encrypted tweaks plus one spare (it
// reads one tweak past the last). The tweaks of the next sector (Z24-Z31)
// are computed while the current one's rounds run, so that no sector waits
// for its own.
func vaes512Sectors512(d direction) {
	TEXT(d.name+"Sectors512VAES", NOSPLIT, sectors512Signaure)
	LoadArgs("rk rounds buf sectors tweaks", RAX, RCX, RDI, R9, RBX)
	blocks, tweaks, next := zregs(0, 8), zregs(8, 8), zregs(24, 8)
	scratch := func(int) (Register, Register) { return Z18, Z19 }
	VBROADCASTI32X4(poly, Z17)
	VMOVDQU64(shiftRight, Z22)
	VMOVDQU64(shiftLeft, Z23)
	tweaks32(At(RBX, 0), tweaks, Z22, Z23, scratch)

	Label("next")
	MOVQ(RDI, RSI)
	VBROADCASTI32X4(At(RAX, 0), Z16)
	for i := range 8 {
		zload(64*i, blocks[i], tweaks[i])
	}
	tweaks32(At(RBX, 16), next, Z22, Z23, scratch)
	LEAQ(At(RAX, 16), R8)
	zrounds("rounds", d, blocks)
	for i := range 8 {
		zlast(d, 64*i, blocks[i], tweaks[i], zmm[20+i%2])
	}
	for i := range 8 {
		VMOVDQA64(next[i], tweaks[i])
	}
	ADDQ(U32(512), RDI)
	ADDQ(Imm(16), RBX)
	DECQ(R9)
	JNZ(LabelRef("next"))
	VZEROUPPER()
	RET()
}
