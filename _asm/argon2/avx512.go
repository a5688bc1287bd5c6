package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// blockAVX512 is G with the whole block in sixteen zmm registers. Rows 2k
// and 2k+1 (128 bytes each) are rows of quarters S[k][0..3]: S[k][i] holds
// words 4i..4i+3 of row 2k in its low 256 bits and of row 2k+1 in its high
// 256 bits, so (S[k][0], S[k][1], S[k][2], S[k][3]) are a, b, c, d of P on
// both rows. Swapping the middle 128-bit lanes of every register turns the
// same registers into columns: (S[0][i], S[1][i], S[2][i], S[3][i]) are a,
// b, c, d of P on columns 2i (low half) and 2i+1 (high half). Rotations
// are single VPRORQs; x and y are read again at the end rather than kept.
func blockAVX512() {
	TEXT("blockAVX512", NOSPLIT, blockSignature)
	loadBlockArgs()
	var s [4][4]Register
	for k := range 4 {
		for i := range 4 {
			s[k][i] = zmm(4*k + i)
		}
	}
	tmp := []Register{Z16, Z17, Z18, Z19}

	Comment("R = x ^ y, rows 2k and 2k+1 into S[k].")
	for k := range 4 {
		for h := range 2 {
			lo, hi := Z20, Z21
			VMOVDQU64(At(RSI, 256*k+64*h), lo)
			VPXORQ(At(RDX, 256*k+64*h), lo, lo)
			VMOVDQU64(At(RSI, 256*k+128+64*h), hi)
			VPXORQ(At(RDX, 256*k+128+64*h), hi, hi)
			VSHUFI64X2(Imm(0x44), hi, lo, s[k][2*h])
			VSHUFI64X2(Imm(0xee), hi, lo, s[k][2*h+1])
		}
	}
	o := ops{
		xor:    func(x, y, dst Register) { VPXORQ(x, y, dst) },
		rotate: func(n int, x, _ Register) { VPRORQ(Imm(uint64(n)), x, x) },
	}
	Comment("P on the rows.")
	permutations([]quad{quad(s[0]), quad(s[1]), quad(s[2]), quad(s[3])}, tmp, o)
	swapMiddleLanes(s)
	Comment("P on the columns.")
	var cols []quad
	for i := range 4 {
		cols = append(cols, quad{s[0][i], s[1][i], s[2][i], s[3][i]})
	}
	permutations(cols, tmp, o)
	swapMiddleLanes(s)

	Comment("out = P(R) ^ x ^ y, or out ^= P(R) ^ x ^ y.")
	TESTB(CL, CL)
	JNZ(LabelRef("xor"))
	storeAVX512(s, false)
	VZEROUPPER()
	RET()
	Label("xor")
	storeAVX512(s, true)
	VZEROUPPER()
	RET()
}

// permutations runs P on each quad of qs, two permutations per quad (one
// per 256-bit lane): GB on the columns (a, b, c, d), then on the diagonals,
// made by rotating b, c and d one, two and three words within each 256-bit
// lane. The quads are independent; their instructions interleave.
func permutations(qs []quad, tmp []Register, o ops) {
	gbAll(qs, tmp, o)
	for _, q := range qs {
		VPERMQ(Imm(0x39), q[1], q[1])
		VPERMQ(Imm(0x4e), q[2], q[2])
		VPERMQ(Imm(0x93), q[3], q[3])
	}
	gbAll(qs, tmp, o)
	for _, q := range qs {
		VPERMQ(Imm(0x93), q[1], q[1])
		VPERMQ(Imm(0x4e), q[2], q[2])
		VPERMQ(Imm(0x39), q[3], q[3])
	}
}

// swapMiddleLanes swaps 128-bit lanes 1 and 2 of every register of s.
func swapMiddleLanes(s [4][4]Register) {
	for k := range 4 {
		for _, r := range s[k] {
			VSHUFI64X2(Imm(0xd8), r, r, r)
		}
	}
}

// storeAVX512 turns each S[k] back into rows 2k and 2k+1, XORs x and y
// (and out, with xor) into them and stores them to out. Each 64 bytes of
// out are written after x and y at the same place are read, so out may be
// y.
func storeAVX512(s [4][4]Register, xor bool) {
	for k := range 4 {
		for h := range 2 {
			for r, imm := range []uint64{0x44, 0xee} {
				off := 256*k + 128*r + 64*h
				v := zmm(22 + r)
				VSHUFI64X2(Imm(imm), s[k][2*h+1], s[k][2*h], v)
				if xor {
					old := zmm(24 + r)
					VMOVDQU64(At(RDI, off), old)
					VPTERNLOGQ(Imm(0x96), At(RSI, off), old, v)
				} else {
					VPXORQ(At(RSI, off), v, v)
				}
				VPXORQ(At(RDX, off), v, v)
				VMOVDQU64(v, At(RDI, off))
			}
		}
	}
}

var zmms = [32]VecPhysical{
	Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31,
}

func zmm(i int) Register { return zmms[i] }
