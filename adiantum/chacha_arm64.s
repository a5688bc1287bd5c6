//go:build arm64 && gc && !purego

#include "textflag.h"

// ChaCha, four blocks at a time with NEON. Vi holds state word i of the four
// blocks (lane j is block j). V16-V19 keep the input state, V20 the block
// counters, V21 the counter step, V31 the byte shuffle for rotating by 8;
// V22-V25 are scratch in the rounds.

// QR4 runs four independent quarter rounds (a_i, b_i, c_i, d_i). Each
// rotation by 12 or 7 XORs into a scratch register, then shifts it back
// into b with VSHL + VSRI.
#define QR4(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	VADD   b0.S4, a0.S4, a0.S4;    \
	VADD   b1.S4, a1.S4, a1.S4;    \
	VADD   b2.S4, a2.S4, a2.S4;    \
	VADD   b3.S4, a3.S4, a3.S4;    \
	VEOR   a0.B16, d0.B16, d0.B16; \
	VEOR   a1.B16, d1.B16, d1.B16; \
	VEOR   a2.B16, d2.B16, d2.B16; \
	VEOR   a3.B16, d3.B16, d3.B16; \
	VREV32 d0.H8, d0.H8;           \
	VREV32 d1.H8, d1.H8;           \
	VREV32 d2.H8, d2.H8;           \
	VREV32 d3.H8, d3.H8;           \
	VADD   d0.S4, c0.S4, c0.S4;    \
	VADD   d1.S4, c1.S4, c1.S4;    \
	VADD   d2.S4, c2.S4, c2.S4;    \
	VADD   d3.S4, c3.S4, c3.S4;    \
	VEOR   c0.B16, b0.B16, V22.B16; \
	VEOR   c1.B16, b1.B16, V23.B16; \
	VEOR   c2.B16, b2.B16, V24.B16; \
	VEOR   c3.B16, b3.B16, V25.B16; \
	VSHL   $12, V22.S4, b0.S4;     \
	VSHL   $12, V23.S4, b1.S4;     \
	VSHL   $12, V24.S4, b2.S4;     \
	VSHL   $12, V25.S4, b3.S4;     \
	VSRI   $20, V22.S4, b0.S4;     \
	VSRI   $20, V23.S4, b1.S4;     \
	VSRI   $20, V24.S4, b2.S4;     \
	VSRI   $20, V25.S4, b3.S4;     \
	VADD   b0.S4, a0.S4, a0.S4;    \
	VADD   b1.S4, a1.S4, a1.S4;    \
	VADD   b2.S4, a2.S4, a2.S4;    \
	VADD   b3.S4, a3.S4, a3.S4;    \
	VEOR   a0.B16, d0.B16, d0.B16; \
	VEOR   a1.B16, d1.B16, d1.B16; \
	VEOR   a2.B16, d2.B16, d2.B16; \
	VEOR   a3.B16, d3.B16, d3.B16; \
	VTBL   V31.B16, [d0.B16], d0.B16; \
	VTBL   V31.B16, [d1.B16], d1.B16; \
	VTBL   V31.B16, [d2.B16], d2.B16; \
	VTBL   V31.B16, [d3.B16], d3.B16; \
	VADD   d0.S4, c0.S4, c0.S4;    \
	VADD   d1.S4, c1.S4, c1.S4;    \
	VADD   d2.S4, c2.S4, c2.S4;    \
	VADD   d3.S4, c3.S4, c3.S4;    \
	VEOR   c0.B16, b0.B16, V22.B16; \
	VEOR   c1.B16, b1.B16, V23.B16; \
	VEOR   c2.B16, b2.B16, V24.B16; \
	VEOR   c3.B16, b3.B16, V25.B16; \
	VSHL   $7, V22.S4, b0.S4;      \
	VSHL   $7, V23.S4, b1.S4;      \
	VSHL   $7, V24.S4, b2.S4;      \
	VSHL   $7, V25.S4, b3.S4;      \
	VSRI   $25, V22.S4, b0.S4;     \
	VSRI   $25, V23.S4, b1.S4;     \
	VSRI   $25, V24.S4, b2.S4;     \
	VSRI   $25, V25.S4, b3.S4

// OUT4 transposes words w..w+3 (registers a, b, c, d) of the four blocks,
// XORs them with bytes off..off+15 of each source block and stores them.
// a-d are clobbered; V22-V29 are scratch.
#define OUT4(a, b, c, d, off) \
	VZIP1 b.S4, a.S4, V22.S4;    \
	VZIP2 b.S4, a.S4, V23.S4;    \
	VZIP1 d.S4, c.S4, a.S4;      \
	VZIP2 d.S4, c.S4, b.S4;      \
	VZIP1 a.D2, V22.D2, V26.D2;  \
	VZIP2 a.D2, V22.D2, V27.D2;  \
	VZIP1 b.D2, V23.D2, V28.D2;  \
	VZIP2 b.D2, V23.D2, V29.D2;  \
	FMOVQ (off)(R2), F22;        \
	FMOVQ (64+off)(R2), F23;     \
	FMOVQ (128+off)(R2), F24;    \
	FMOVQ (192+off)(R2), F25;    \
	VEOR  V22.B16, V26.B16, V26.B16; \
	VEOR  V23.B16, V27.B16, V27.B16; \
	VEOR  V24.B16, V28.B16, V28.B16; \
	VEOR  V25.B16, V29.B16, V29.B16; \
	FMOVQ F26, (off)(R1);        \
	FMOVQ F27, (64+off)(R1);     \
	FMOVQ F28, (128+off)(R1);    \
	FMOVQ F29, (192+off)(R1)

// ADDSTATE adds input word i (lane l of register src) to v.
#define ADDSTATE(src, l, v) \
	VDUP src.S[l], V22.S4; \
	VADD V22.S4, v.S4, v.S4

// func chachaXORNEON(s *[16]uint32, dst, src *byte, groups int, rounds int)
TEXT ·chachaXORNEON(SB), NOSPLIT, $0-40
	MOVD s+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD groups+24(FP), R3
	MOVD rounds+32(FP), R4

	VLD1  (R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	VMOVQ $0x0605040702010003, $0x0E0D0C0F0A09080B, V31
	VMOVQ $0x0000000100000000, $0x0000000300000002, V20
	VDUP  V19.S[0], V21.S4
	VADD  V21.S4, V20.S4, V20.S4
	VMOVQ $0x0000000400000004, $0x0000000400000004, V21

group:
	VDUP V16.S[0], V0.S4
	VDUP V16.S[1], V1.S4
	VDUP V16.S[2], V2.S4
	VDUP V16.S[3], V3.S4
	VDUP V17.S[0], V4.S4
	VDUP V17.S[1], V5.S4
	VDUP V17.S[2], V6.S4
	VDUP V17.S[3], V7.S4
	VDUP V18.S[0], V8.S4
	VDUP V18.S[1], V9.S4
	VDUP V18.S[2], V10.S4
	VDUP V18.S[3], V11.S4
	VORR V20.B16, V20.B16, V12.B16
	VDUP V19.S[1], V13.S4
	VDUP V19.S[2], V14.S4
	VDUP V19.S[3], V15.S4
	MOVD R4, R5

doubleround:
	QR4(V0, V4, V8, V12, V1, V5, V9, V13, V2, V6, V10, V14, V3, V7, V11, V15)
	QR4(V0, V5, V10, V15, V1, V6, V11, V12, V2, V7, V8, V13, V3, V4, V9, V14)
	SUB  $2, R5
	CBNZ R5, doubleround

	ADDSTATE(V16, 0, V0)
	ADDSTATE(V16, 1, V1)
	ADDSTATE(V16, 2, V2)
	ADDSTATE(V16, 3, V3)
	ADDSTATE(V17, 0, V4)
	ADDSTATE(V17, 1, V5)
	ADDSTATE(V17, 2, V6)
	ADDSTATE(V17, 3, V7)
	ADDSTATE(V18, 0, V8)
	ADDSTATE(V18, 1, V9)
	ADDSTATE(V18, 2, V10)
	ADDSTATE(V18, 3, V11)
	VADD V20.S4, V12.S4, V12.S4
	ADDSTATE(V19, 1, V13)
	ADDSTATE(V19, 2, V14)
	ADDSTATE(V19, 3, V15)

	OUT4(V0, V1, V2, V3, 0)
	OUT4(V4, V5, V6, V7, 16)
	OUT4(V8, V9, V10, V11, 32)
	OUT4(V12, V13, V14, V15, 48)

	VADD V21.S4, V20.S4, V20.S4
	ADD  $256, R1
	ADD  $256, R2
	SUB  $1, R3
	CBNZ R3, group

	// Leave no key stream in the vector registers.
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	VEOR V28.B16, V28.B16, V28.B16
	VEOR V29.B16, V29.B16, V29.B16
	RET
