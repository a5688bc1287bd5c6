package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// blockAVX2 is G with two permutations at a time in eight ymm registers,
// each register holding one of P's eight 16-byte registers for the first
// permutation in its low 128 bits and for the second in its high 128 bits.
// In that layout the diagonal step is byte alignments within 128-bit
// lanes (one cycle) rather than cross-lane word permutes, and the columns
// pass reads the rows as they lie in memory: columns 2i and 2i+1 are
// together bytes 32i..32i+31 of each row. The rows pass (rows r and r+1
// of x ^ y, through P, into a 1 KiB frame) rearranges 128-bit lanes on the
// way in and out; the columns pass reads the frame, runs P and XORs x and
// y into out. Rotations by 32 are word shuffles, by 24 and 16 byte
// shuffles, by 63 an add, a shift and an XOR.
func blockAVX2() {
	rot24 := Words("rot24", 0x0201000706050403, 0x0a09080f0e0d0c0b, 0x0201000706050403, 0x0a09080f0e0d0c0b)
	rot16 := Words("rot16", 0x0100070605040302, 0x09080f0e0d0c0b0a, 0x0100070605040302, 0x09080f0e0d0c0b0a)

	TEXT("blockAVX2", 0, blockSignature)
	frame := AllocLocal(1024)
	loadBlockArgs()
	m24, m16 := Y8, Y9
	VMOVDQU(rot24, m24)
	VMOVDQU(rot16, m16)
	o := ops{
		xor: func(x, y, dst Register) { VPXOR(x, y, dst) },
		rotate: func(n int, x, t Register) {
			switch n {
			case 32:
				VPSHUFD(Imm(0xb1), x, x)
			case 24:
				VPSHUFB(m24, x, x)
			case 16:
				VPSHUFB(m16, x, x)
			case 63:
				VPADDQ(x, x, t)
				VPSRLQ(Imm(63), x, x)
				VPXOR(t, x, x)
			}
		},
	}
	s := &pairState{
		h:     halves{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7},
		spare: Y13,
		tmp:   []Register{Y10, Y11},
		o:     o,
	}

	Comment("P on the rows of x ^ y, two at a time, into the frame.")
	for r := 0; r < 8; r += 2 {
		for q := range 4 {
			lo, hi := s.h[2*q+1], Y12
			VMOVDQU(At(RSI, 128*r+32*q), lo)
			VPXOR(At(RDX, 128*r+32*q), lo, lo)
			VMOVDQU(At(RSI, 128*(r+1)+32*q), hi)
			VPXOR(At(RDX, 128*(r+1)+32*q), hi, hi)
			VPERM2I128(Imm(0x20), hi, lo, s.h[2*q])
			VPERM2I128(Imm(0x31), hi, lo, s.h[2*q+1])
		}
		s.permute()
		for q := range 4 {
			for j, imm := range []uint64{0x20, 0x31} {
				v := Y12
				VPERM2I128(Imm(imm), s.h[2*q+1], s.h[2*q], v)
				VMOVDQU(v, frame.Offset(128*(r+j)+32*q))
			}
		}
	}

	Comment("P on the columns, two at a time, into out.")
	TESTB(CL, CL)
	JNZ(LabelRef("xor"))
	columnsAVX2(frame, s, false)
	VZEROUPPER()
	RET()
	Label("xor")
	columnsAVX2(frame, s, true)
	VZEROUPPER()
	RET()
}

// columnsAVX2 runs P on columns 2i and 2i+1 for i = 0..3, whose eight
// registers are bytes 32i..32i+31 of the frame's rows 0..7, and XORs the
// result with x and y into out (or out ^= it, with xor).
func columnsAVX2(frame Mem, s *pairState, xor bool) {
	for i := range 4 {
		for row, v := range s.h {
			VMOVDQU(frame.Offset(128*row+32*i), v)
		}
		s.permute()
		for row, v := range s.h {
			off := 128*row + 32*i
			VPXOR(At(RSI, off), v, v)
			VPXOR(At(RDX, off), v, v)
			if xor {
				VPXOR(At(RDI, off), v, v)
			}
			VMOVDQU(v, At(RDI, off))
		}
	}
}

// halves are P's eight 16-byte registers a0, a1, b0, b1, c0, c1, d0, d1
// (words 0-1, 2-3, ..., 14-15), each a ymm register holding them for two
// permutations.
type halves [8]Register

// pairState is where two permutations are: their halves, which registers
// move between as the diagonal step renames them, one spare register, and
// the scratch registers of gbAll.
type pairState struct {
	h     halves
	spare Register
	tmp   []Register
	o     ops
}

// permute runs P on both permutations. The columns of P are GB on
// (a0, b0, c0, d0) and (a1, b1, c1, d1); the diagonals on
// (a0, b'0, c1, d'0) and (a1, b'1, c0, d'1), with b' = (b0.hi, b1.lo),
// (b1.hi, b0.lo) and d' = (d1.hi, d0.lo), (d0.hi, d1.lo).
func (s *pairState) permute() {
	h := &s.h
	gbAll([]quad{{h[0], h[2], h[4], h[6]}, {h[1], h[3], h[5], h[7]}}, s.tmp, s.o)
	h[2], h[3] = s.align(h[2], h[3])
	h[6], h[7] = s.align(h[7], h[6])
	gbAll([]quad{{h[0], h[2], h[5], h[6]}, {h[1], h[3], h[4], h[7]}}, s.tmp, s.o)
	h[2], h[3] = s.align(h[3], h[2])
	h[6], h[7] = s.align(h[6], h[7])
}

// align returns (x.hi, y.lo) and (y.hi, x.lo) in each 128-bit lane, the
// first in the spare register, the second in y; x becomes the spare.
func (s *pairState) align(x, y Register) (Register, Register) {
	first := s.spare
	VPALIGNR(Imm(8), x, y, first)
	VPALIGNR(Imm(8), y, x, y)
	s.spare = x
	return first, y
}
