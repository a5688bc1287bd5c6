//go:build arm64 && gc && !purego

#include "textflag.h"

// G with NEON, two permutations at a time: P's eight 16-byte registers
// a0, a1, b0, b1, c0, c1, d0, d1 (words 0-1, 2-3, ..., 14-15) are V0-V7
// for the first and V8-V15 for the second. The rows pass takes rows r and
// r+1 of x ^ y (each 128 bytes, so its registers in order) through P into
// a 1 KiB frame; the columns pass takes columns j and j+1 from the frame
// (column j's register i is bytes 16j..16j+15 of row i, so each row gives
// both columns' register i in one 32-byte load) through P, XORs x and y
// (and out) and stores them to out. V16-V19 hold the diagonal step's b and
// d registers, V20-V27 are scratch, V28 and V29 the byte shuffles that
// rotate 64-bit lanes by 24 and 16 bits.

// Go's assembler has no UMULL, so it is encoded by hand:
// UMULL Vd.2D, Vn.2S, Vm.2S is 0x2ea0c000 | m<<16 | n<<5 | d; UMULL2
// (the upper halves, Vn.4S and Vm.4S) sets bit 30.
#define UMULL(m, n, d) WORD $(0x2ea0c000 | (m)<<16 | (n)<<5 | (d))
#define UMULL2(m, n, d) WORD $(0x6ea0c000 | (m)<<16 | (n)<<5 | (d))

// BLAMKA4 sets xi = xi + yi + 2*lo(xi)*lo(yi) for four register pairs:
// UZP1 gathers the low halves of two registers' words, UMULL and UMULL2
// multiply them.
#define BLAMKA4(x0, y0, x1, y1, x2, y2, x3, y3) \
	VUZP1 x1.S4, x0.S4, V20.S4; \
	VUZP1 y1.S4, y0.S4, V21.S4; \
	VUZP1 x3.S4, x2.S4, V22.S4; \
	VUZP1 y3.S4, y2.S4, V23.S4; \
	UMULL(21, 20, 24);          \
	UMULL2(21, 20, 25);         \
	UMULL(23, 22, 26);          \
	UMULL2(23, 22, 27);         \
	VADD  y0.D2, x0.D2, x0.D2;  \
	VADD  y1.D2, x1.D2, x1.D2;  \
	VADD  y2.D2, x2.D2, x2.D2;  \
	VADD  y3.D2, x3.D2, x3.D2;  \
	VADD  V24.D2, V24.D2, V24.D2; \
	VADD  V25.D2, V25.D2, V25.D2; \
	VADD  V26.D2, V26.D2, V26.D2; \
	VADD  V27.D2, V27.D2, V27.D2; \
	VADD  V24.D2, x0.D2, x0.D2; \
	VADD  V25.D2, x1.D2, x1.D2; \
	VADD  V26.D2, x2.D2, x2.D2; \
	VADD  V27.D2, x3.D2, x3.D2

// The XR macros set y = (y ^ x) >>> n for four register pairs: by 32 a
// word swap, by 24 and 16 a byte shuffle, by 63 a shift left and a shift
// right and insert out of a scratch register.
#define XR32(x0, y0, x1, y1, x2, y2, x3, y3) \
	VEOR   x0.B16, y0.B16, y0.B16; \
	VEOR   x1.B16, y1.B16, y1.B16; \
	VEOR   x2.B16, y2.B16, y2.B16; \
	VEOR   x3.B16, y3.B16, y3.B16; \
	VREV64 y0.S4, y0.S4;           \
	VREV64 y1.S4, y1.S4;           \
	VREV64 y2.S4, y2.S4;           \
	VREV64 y3.S4, y3.S4

#define XRTBL(table, x0, y0, x1, y1, x2, y2, x3, y3) \
	VEOR x0.B16, y0.B16, y0.B16;         \
	VEOR x1.B16, y1.B16, y1.B16;         \
	VEOR x2.B16, y2.B16, y2.B16;         \
	VEOR x3.B16, y3.B16, y3.B16;         \
	VTBL table.B16, [y0.B16], y0.B16;    \
	VTBL table.B16, [y1.B16], y1.B16;    \
	VTBL table.B16, [y2.B16], y2.B16;    \
	VTBL table.B16, [y3.B16], y3.B16

#define XR63(x0, y0, x1, y1, x2, y2, x3, y3) \
	VEOR x0.B16, y0.B16, V20.B16; \
	VEOR x1.B16, y1.B16, V21.B16; \
	VEOR x2.B16, y2.B16, V22.B16; \
	VEOR x3.B16, y3.B16, V23.B16; \
	VSHL $1, V20.D2, y0.D2;       \
	VSHL $1, V21.D2, y1.D2;       \
	VSHL $1, V22.D2, y2.D2;       \
	VSHL $1, V23.D2, y3.D2;       \
	VSRI $63, V20.D2, y0.D2;      \
	VSRI $63, V21.D2, y1.D2;      \
	VSRI $63, V22.D2, y2.D2;      \
	VSRI $63, V23.D2, y3.D2

// GB4 is GB on four independent quads (ai, bi, ci, di).
#define GB4(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	BLAMKA4(a0, b0, a1, b1, a2, b2, a3, b3);      \
	XR32(a0, d0, a1, d1, a2, d2, a3, d3);         \
	BLAMKA4(c0, d0, c1, d1, c2, d2, c3, d3);      \
	XRTBL(V28, c0, b0, c1, b1, c2, b2, c3, b3);   \
	BLAMKA4(a0, b0, a1, b1, a2, b2, a3, b3);      \
	XRTBL(V29, a0, d0, a1, d1, a2, d2, a3, d3);   \
	BLAMKA4(c0, d0, c1, d1, c2, d2, c3, d3);      \
	XR63(c0, b0, c1, b1, c2, b2, c3, b3)

// DIAGONALIZE turns the b and d registers of one permutation into the
// diagonals' (VEXT $8, m, n, d sets d to the high half of n, then the low
// half of m): b'0 = (b0.hi, b1.lo) and b'1 = (b1.hi, b0.lo) into t0 and
// t1, d'0 = (d1.hi, d0.lo) and d'1 = (d0.hi, d1.lo) into b0 and b1. The
// diagonals' GB is then on (a0, t0, c1, b0) and (a1, t1, c0, b1).
#define DIAGONALIZE(b0, b1, d0, d1, t0, t1) \
	VEXT $8, b1.B16, b0.B16, t0.B16; \
	VEXT $8, b0.B16, b1.B16, t1.B16; \
	VEXT $8, d0.B16, d1.B16, b0.B16; \
	VEXT $8, d1.B16, d0.B16, b1.B16

// UNDIAGONALIZE puts b and d back: d0 = (d'0.hi, d'1.lo),
// d1 = (d'1.hi, d'0.lo), b0 = (b'1.hi, b'0.lo), b1 = (b'0.hi, b'1.lo).
#define UNDIAGONALIZE(b0, b1, d0, d1, t0, t1) \
	VEXT $8, b1.B16, b0.B16, d0.B16; \
	VEXT $8, b0.B16, b1.B16, d1.B16; \
	VEXT $8, t0.B16, t1.B16, b0.B16; \
	VEXT $8, t1.B16, t0.B16, b1.B16

// PERMUTE2 is P on both permutations, V0-V7 and V8-V15.
#define PERMUTE2 \
	GB4(V0, V2, V4, V6, V1, V3, V5, V7, V8, V10, V12, V14, V9, V11, V13, V15); \
	DIAGONALIZE(V2, V3, V6, V7, V16, V17);                                     \
	DIAGONALIZE(V10, V11, V14, V15, V18, V19);                                 \
	GB4(V0, V16, V5, V2, V1, V17, V4, V3, V8, V18, V13, V10, V9, V19, V12, V11); \
	UNDIAGONALIZE(V2, V3, V6, V7, V16, V17);                                   \
	UNDIAGONALIZE(V10, V11, V14, V15, V18, V19)

// OUTROW XORs x and y at offset off of R7 and R8 (and out at R9, when R3,
// xor, is set) into the columns pass's results for one row, vp and vq (fp
// and fq as Q registers), and stores them to out.
#define OUTROW(off, fp, fq, vp, vq) \
	FLDPQ off(R7), (F20, F21);   \
	FLDPQ off(R8), (F22, F23);   \
	VEOR  V20.B16, vp.B16, vp.B16; \
	VEOR  V21.B16, vq.B16, vq.B16; \
	VEOR  V22.B16, vp.B16, vp.B16; \
	VEOR  V23.B16, vq.B16, vq.B16; \
	CBZ   R3, 4(PC);             \
	FLDPQ off(R9), (F24, F25);   \
	VEOR  V24.B16, vp.B16, vp.B16; \
	VEOR  V25.B16, vq.B16, vq.B16; \
	FSTPQ (fp, fq), off(R9)

// func blockNEON(out, x, y *block, xor bool)
TEXT ·blockNEON(SB), 0, $1040-25
	MOVD  out+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  y+16(FP), R2
	MOVBU xor+24(FP), R3
	VMOVQ $0x0201000706050403, $0x0a09080f0e0d0c0b, V28
	VMOVQ $0x0100070605040302, $0x09080f0e0d0c0b0a, V29

	// The rows, two at a time, into the frame at R4.
	ADD  $16, RSP, R4
	MOVD R4, R6
	MOVD R1, R7
	MOVD R2, R8
	MOVD $4, R5

rows:
	VLD1.P 64(R7), [V0.D2, V1.D2, V2.D2, V3.D2]
	VLD1.P 64(R7), [V4.D2, V5.D2, V6.D2, V7.D2]
	VLD1.P 64(R7), [V8.D2, V9.D2, V10.D2, V11.D2]
	VLD1.P 64(R7), [V12.D2, V13.D2, V14.D2, V15.D2]
	VLD1.P 64(R8), [V20.D2, V21.D2, V22.D2, V23.D2]
	VLD1.P 64(R8), [V24.D2, V25.D2, V26.D2, V27.D2]
	VEOR   V20.B16, V0.B16, V0.B16
	VEOR   V21.B16, V1.B16, V1.B16
	VEOR   V22.B16, V2.B16, V2.B16
	VEOR   V23.B16, V3.B16, V3.B16
	VEOR   V24.B16, V4.B16, V4.B16
	VEOR   V25.B16, V5.B16, V5.B16
	VEOR   V26.B16, V6.B16, V6.B16
	VEOR   V27.B16, V7.B16, V7.B16
	VLD1.P 64(R8), [V20.D2, V21.D2, V22.D2, V23.D2]
	VLD1.P 64(R8), [V24.D2, V25.D2, V26.D2, V27.D2]
	VEOR   V20.B16, V8.B16, V8.B16
	VEOR   V21.B16, V9.B16, V9.B16
	VEOR   V22.B16, V10.B16, V10.B16
	VEOR   V23.B16, V11.B16, V11.B16
	VEOR   V24.B16, V12.B16, V12.B16
	VEOR   V25.B16, V13.B16, V13.B16
	VEOR   V26.B16, V14.B16, V14.B16
	VEOR   V27.B16, V15.B16, V15.B16
	PERMUTE2
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(R6)
	VST1.P [V4.D2, V5.D2, V6.D2, V7.D2], 64(R6)
	VST1.P [V8.D2, V9.D2, V10.D2, V11.D2], 64(R6)
	VST1.P [V12.D2, V13.D2, V14.D2, V15.D2], 64(R6)
	SUBS   $1, R5
	BNE    rows

	// The columns, two at a time: frame, x, y and out at R6-R9 step
	// 32 bytes along the rows.
	MOVD R4, R6
	MOVD R1, R7
	MOVD R2, R8
	MOVD R0, R9
	MOVD $4, R5

columns:
	FLDPQ 0(R6), (F0, F8)
	FLDPQ 128(R6), (F1, F9)
	FLDPQ 256(R6), (F2, F10)
	FLDPQ 384(R6), (F3, F11)
	FLDPQ 512(R6), (F4, F12)
	FLDPQ 640(R6), (F5, F13)
	FLDPQ 768(R6), (F6, F14)
	FLDPQ 896(R6), (F7, F15)
	PERMUTE2
	OUTROW(0, F0, F8, V0, V8)
	OUTROW(128, F1, F9, V1, V9)
	OUTROW(256, F2, F10, V2, V10)
	OUTROW(384, F3, F11, V3, V11)
	OUTROW(512, F4, F12, V4, V12)
	OUTROW(640, F5, F13, V5, V13)
	OUTROW(768, F6, F14, V6, V14)
	OUTROW(896, F7, F15, V7, V15)
	ADD  $32, R6
	ADD  $32, R7
	ADD  $32, R8
	ADD  $32, R9
	SUBS $1, R5
	BNE  columns
	RET

// func prefetch(b *block)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVD b+0(FP), R0
	PRFM 0(R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	PRFM 256(R0), PLDL1KEEP
	PRFM 320(R0), PLDL1KEEP
	PRFM 384(R0), PLDL1KEEP
	PRFM 448(R0), PLDL1KEEP
	PRFM 512(R0), PLDL1KEEP
	PRFM 576(R0), PLDL1KEEP
	PRFM 640(R0), PLDL1KEEP
	PRFM 704(R0), PLDL1KEEP
	PRFM 768(R0), PLDL1KEEP
	PRFM 832(R0), PLDL1KEEP
	PRFM 896(R0), PLDL1KEEP
	PRFM 960(R0), PLDL1KEEP
	RET
