package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// chachaAVX2 is ChaCha eight blocks at a time with AVX2. Register Yi holds
// state word i of all eight blocks (lane j is block j). Rotations by 16 and
// 8 are byte shuffles; those by 12 and 7 need a scratch register, so one "d"
// word is spilled to the stack around them.
//
// Frame layout:
//
//	0 .. 511    the initial state, word i broadcast at 32*i
//	512 .. 767  words 8..15 while words 0..7 are written out
//	768 .. 799  spill slot
func chachaAVX2() {
	rol16 := Words("rol16", 0x0504070601000302, 0x0D0C0F0E09080B0A, 0x0504070601000302, 0x0D0C0F0E09080B0A)
	rol8 := Words("rol8", 0x0605040702010003, 0x0E0D0C0F0A09080B, 0x0605040702010003, 0x0E0D0C0F0A09080B)
	lanes := Words("lanes", 0x0000000100000000, 0x0000000300000002, 0x0000000500000004, 0x0000000700000006)
	eight := Words("eight", 0x0000000800000008, 0x0000000800000008, 0x0000000800000008, 0x0000000800000008)

	TEXT("chachaXOR8AVX2", 0, chachaSignature)
	frame := AllocLocal(800)
	state := func(i int) Mem { return frame.Offset(32 * i) }
	spill := frame.Offset(768)
	loadChaChaArgs()

	for i := range 16 {
		VPBROADCASTD(At(RAX, 4*i), Y0)
		if i == 12 {
			VPADDD(lanes, Y0, Y0)
		}
		VMOVDQU(Y0, state(i))
	}

	Label("group")
	w := words(0, asY)
	for i := range 16 {
		VMOVDQU(state(i), w[i])
	}
	MOVQ(RDX, RBX)

	xor := func(x, y Register) { VPXOR(x, y, y) }
	rotate := func(r quad, n int) {
		switch n {
		case 16, 8:
			mask := map[int]Mem{16: rol16, 8: rol8}[n]
			for _, x := range r {
				VPSHUFB(mask, x, x)
			}
		default:
			// The d word Y15 is the scratch register.
			VMOVDQU(Y15, spill)
			for _, x := range r {
				VPSLLD(Imm(uint64(n)), x, Y15)
				VPSRLD(Imm(uint64(32-n)), x, x)
				VPOR(Y15, x, x)
			}
			VMOVDQU(spill, Y15)
		}
	}
	Label("doubleround")
	doubleRound(w, [4]int{1, 2, 3, 0}, xor, rotate)
	SUBQ(Imm(2), RBX)
	JNZ(LabelRef("doubleround"))

	for i := range 16 {
		VPADDD(state(i), w[i], w[i])
	}

	Comment("Words 8..15 wait on the stack while words 0..7 go out.")
	for i := 8; i < 16; i++ {
		VMOVDQU(w[i], frame.Offset(512+32*(i-8)))
	}
	xorHalvesAVX2(w, 0)
	for i := 8; i < 16; i++ {
		VMOVDQU(frame.Offset(512+32*(i-8)), w[i-8])
	}
	xorHalvesAVX2(w, 32)

	VMOVDQU(state(12), Y0)
	VPADDD(eight, Y0, Y0)
	VMOVDQU(Y0, state(12))
	ADDQ(U32(512), RSI)
	ADDQ(U32(512), RDI)
	DECQ(RCX)
	JNZ(LabelRef("group"))

	Comment("Leave no key stream on the stack.")
	VPXOR(Y0, Y0, Y0)
	MOVQ(U32(0), RBX)
	Label("clear")
	VMOVDQU(Y0, frame.Idx(RBX, 1))
	ADDQ(Imm(32), RBX)
	CMPQ(RBX, U32(800))
	JB(LabelRef("clear"))
	VZEROUPPER()
	RET()
}

// xorHalvesAVX2 transposes the eight words in w[0:8] and XORs them into the
// 32 bytes at offset off of each of the eight blocks; w[8:16] are scratch.
func xorHalvesAVX2(w [16]Register, off int) {
	transpose4(quad{w[0], w[1], w[2], w[3]}, quad{w[8], w[9], w[10], w[11]})
	transpose4(quad{w[4], w[5], w[6], w[7]}, quad{w[12], w[13], w[14], w[15]})
	// w[b] holds the words of blocks b and b+4 for the first 16 bytes,
	// w[b+4] for the next 16.
	for b := range 4 {
		lo, hi, t := w[b], w[b+4], w[8]
		VPERM2I128(Imm(0x20), hi, lo, t)
		VPXOR(At(RSI, 64*b+off), t, t)
		VMOVDQU(t, At(RDI, 64*b+off))
		VPERM2I128(Imm(0x31), hi, lo, t)
		VPXOR(At(RSI, 64*(b+4)+off), t, t)
		VMOVDQU(t, At(RDI, 64*(b+4)+off))
	}
}
