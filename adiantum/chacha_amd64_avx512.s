//go:build amd64 && gc && !purego

#include "textflag.h"

// ChaCha, sixteen blocks at a time with AVX-512. Zi holds state word i of
// the sixteen blocks (lane j is block j); rotations are single VPROLDs, the
// feed-forward adds the input words straight from memory by broadcast, and
// Z31 carries the block counters. Z16-Z30 are scratch for the transpose.

DATA lanes16<>+0x00(SB)/8, $0x0000000100000000
DATA lanes16<>+0x08(SB)/8, $0x0000000300000002
DATA lanes16<>+0x10(SB)/8, $0x0000000500000004
DATA lanes16<>+0x18(SB)/8, $0x0000000700000006
DATA lanes16<>+0x20(SB)/8, $0x0000000900000008
DATA lanes16<>+0x28(SB)/8, $0x0000000b0000000a
DATA lanes16<>+0x30(SB)/8, $0x0000000d0000000c
DATA lanes16<>+0x38(SB)/8, $0x0000000f0000000e
GLOBL lanes16<>(SB), RODATA|NOPTR, $64

DATA sixteen<>+0x00(SB)/4, $16
GLOBL sixteen<>(SB), RODATA|NOPTR, $4

// QR4Z runs four independent quarter rounds (a_i, b_i, c_i, d_i).
#define QR4Z(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	VPADDD b0, a0, a0;  \
	VPADDD b1, a1, a1;  \
	VPADDD b2, a2, a2;  \
	VPADDD b3, a3, a3;  \
	VPXORD a0, d0, d0;  \
	VPXORD a1, d1, d1;  \
	VPXORD a2, d2, d2;  \
	VPXORD a3, d3, d3;  \
	VPROLD $16, d0, d0; \
	VPROLD $16, d1, d1; \
	VPROLD $16, d2, d2; \
	VPROLD $16, d3, d3; \
	VPADDD d0, c0, c0;  \
	VPADDD d1, c1, c1;  \
	VPADDD d2, c2, c2;  \
	VPADDD d3, c3, c3;  \
	VPXORD c0, b0, b0;  \
	VPXORD c1, b1, b1;  \
	VPXORD c2, b2, b2;  \
	VPXORD c3, b3, b3;  \
	VPROLD $12, b0, b0; \
	VPROLD $12, b1, b1; \
	VPROLD $12, b2, b2; \
	VPROLD $12, b3, b3; \
	VPADDD b0, a0, a0;  \
	VPADDD b1, a1, a1;  \
	VPADDD b2, a2, a2;  \
	VPADDD b3, a3, a3;  \
	VPXORD a0, d0, d0;  \
	VPXORD a1, d1, d1;  \
	VPXORD a2, d2, d2;  \
	VPXORD a3, d3, d3;  \
	VPROLD $8, d0, d0;  \
	VPROLD $8, d1, d1;  \
	VPROLD $8, d2, d2;  \
	VPROLD $8, d3, d3;  \
	VPADDD d0, c0, c0;  \
	VPADDD d1, c1, c1;  \
	VPADDD d2, c2, c2;  \
	VPADDD d3, c3, c3;  \
	VPXORD c0, b0, b0;  \
	VPXORD c1, b1, b1;  \
	VPXORD c2, b2, b2;  \
	VPXORD c3, b3, b3;  \
	VPROLD $7, b0, b0;  \
	VPROLD $7, b1, b1;  \
	VPROLD $7, b2, b2;  \
	VPROLD $7, b3, b3

// TRANSPOSE4Z turns four registers holding words w..w+3 of the sixteen
// blocks into r_k = [block k | block 4+k | block 8+k | block 12+k] for
// k = 0..3, each 128-bit lane holding the four words in order.
#define TRANSPOSE4Z(r0, r1, r2, r3, t0, t1, t2, t3) \
	VPUNPCKLDQ  r1, r0, t0; \
	VPUNPCKHDQ  r1, r0, t1; \
	VPUNPCKLDQ  r3, r2, t2; \
	VPUNPCKHDQ  r3, r2, t3; \
	VPUNPCKLQDQ t2, t0, r0; \
	VPUNPCKHQDQ t2, t0, r1; \
	VPUNPCKLQDQ t3, t1, r2; \
	VPUNPCKHQDQ t3, t1, r3

// BLOCKS4Z writes blocks k, 4+k, 8+k and 12+k, whose words 0-3, 4-7,
// 8-11 and 12-15 are in a, b, c, d (as TRANSPOSE4Z leaves them).
#define BLOCKS4Z(a, b, c, d, k) \
	VSHUFI32X4 $0x44, b, a, Z24;                 \
	VSHUFI32X4 $0xee, b, a, Z25;                 \
	VSHUFI32X4 $0x44, d, c, Z26;                 \
	VSHUFI32X4 $0xee, d, c, Z27;                 \
	VSHUFI32X4 $0x88, Z26, Z24, Z28;             \
	VSHUFI32X4 $0xdd, Z26, Z24, Z29;             \
	VSHUFI32X4 $0x88, Z27, Z25, Z30;             \
	VSHUFI32X4 $0xdd, Z27, Z25, Z24;             \
	VPXORD     (64*k)(SI), Z28, Z28;             \
	VPXORD     (64*(4+k))(SI), Z29, Z29;         \
	VPXORD     (64*(8+k))(SI), Z30, Z30;         \
	VPXORD     (64*(12+k))(SI), Z24, Z24;        \
	VMOVDQU32  Z28, (64*k)(DI);                  \
	VMOVDQU32  Z29, (64*(4+k))(DI);              \
	VMOVDQU32  Z30, (64*(8+k))(DI);              \
	VMOVDQU32  Z24, (64*(12+k))(DI)

// func chachaXOR16AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)
TEXT ·chachaXOR16AVX512(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ rounds+32(FP), DX

	VPBROADCASTD 48(AX), Z31
	VPADDD       lanes16<>(SB), Z31, Z31

group:
	VPBROADCASTD 0(AX), Z0
	VPBROADCASTD 4(AX), Z1
	VPBROADCASTD 8(AX), Z2
	VPBROADCASTD 12(AX), Z3
	VPBROADCASTD 16(AX), Z4
	VPBROADCASTD 20(AX), Z5
	VPBROADCASTD 24(AX), Z6
	VPBROADCASTD 28(AX), Z7
	VPBROADCASTD 32(AX), Z8
	VPBROADCASTD 36(AX), Z9
	VPBROADCASTD 40(AX), Z10
	VPBROADCASTD 44(AX), Z11
	VMOVDQA32    Z31, Z12
	VPBROADCASTD 52(AX), Z13
	VPBROADCASTD 56(AX), Z14
	VPBROADCASTD 60(AX), Z15
	MOVQ         DX, BX

doubleround:
	QR4Z(Z0, Z4, Z8, Z12, Z1, Z5, Z9, Z13, Z2, Z6, Z10, Z14, Z3, Z7, Z11, Z15)
	QR4Z(Z0, Z5, Z10, Z15, Z1, Z6, Z11, Z12, Z2, Z7, Z8, Z13, Z3, Z4, Z9, Z14)
	SUBQ $2, BX
	JNZ  doubleround

	VPADDD.BCST 0(AX), Z0, Z0
	VPADDD.BCST 4(AX), Z1, Z1
	VPADDD.BCST 8(AX), Z2, Z2
	VPADDD.BCST 12(AX), Z3, Z3
	VPADDD.BCST 16(AX), Z4, Z4
	VPADDD.BCST 20(AX), Z5, Z5
	VPADDD.BCST 24(AX), Z6, Z6
	VPADDD.BCST 28(AX), Z7, Z7
	VPADDD.BCST 32(AX), Z8, Z8
	VPADDD.BCST 36(AX), Z9, Z9
	VPADDD.BCST 40(AX), Z10, Z10
	VPADDD.BCST 44(AX), Z11, Z11
	VPADDD      Z31, Z12, Z12
	VPADDD.BCST 52(AX), Z13, Z13
	VPADDD.BCST 56(AX), Z14, Z14
	VPADDD.BCST 60(AX), Z15, Z15

	TRANSPOSE4Z(Z0, Z1, Z2, Z3, Z16, Z17, Z18, Z19)
	TRANSPOSE4Z(Z4, Z5, Z6, Z7, Z20, Z21, Z22, Z23)
	TRANSPOSE4Z(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)
	TRANSPOSE4Z(Z12, Z13, Z14, Z15, Z20, Z21, Z22, Z23)
	BLOCKS4Z(Z0, Z4, Z8, Z12, 0)
	BLOCKS4Z(Z1, Z5, Z9, Z13, 1)
	BLOCKS4Z(Z2, Z6, Z10, Z14, 2)
	BLOCKS4Z(Z3, Z7, Z11, Z15, 3)

	VPADDD.BCST sixteen<>(SB), Z31, Z31
	ADDQ        $1024, SI
	ADDQ        $1024, DI
	DECQ        CX
	JNZ         group

	// Leave no key stream in the vector registers.
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z24, Z24, Z24
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VZEROUPPER
	RET

// QR4Y is QR4Z on ymm registers (AVX-512VL): eight blocks, one per lane.
#define QR4Y(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	QR4Z(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3)

// TRANSPOSE4Y is TRANSPOSE4Z on ymm registers: r_k = [block k | block 4+k].
#define TRANSPOSE4Y(r0, r1, r2, r3, t0, t1, t2, t3) \
	TRANSPOSE4Z(r0, r1, r2, r3, t0, t1, t2, t3)

// HALFY writes 32 bytes of blocks b and b+4 at byte offset off of each
// block, from lo (first 16 bytes of both) and hi (next 16).
#define HALFY(lo, hi, b, off) \
	VSHUFI64X2 $0, hi, lo, Y24;              \
	VSHUFI64X2 $3, hi, lo, Y25;              \
	VPXORD     (64*b+off)(SI), Y24, Y24;     \
	VPXORD     (64*(b+4)+off)(SI), Y25, Y25; \
	VMOVDQU32  Y24, (64*b+off)(DI);          \
	VMOVDQU32  Y25, (64*(b+4)+off)(DI)

// func chachaXOR8AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)
//
// Eight blocks at a time like chachaXOR8AVX2, but with AVX-512VL's 32
// registers and VPROLD: no spills and one instruction per rotation. It
// serves streams (or their tails) too short for sixteen blocks.
TEXT ·chachaXOR8AVX512(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ rounds+32(FP), DX

	VPBROADCASTD 48(AX), Y31
	VPADDD       lanes16<>(SB), Y31, Y31

group8:
	VPBROADCASTD 0(AX), Y0
	VPBROADCASTD 4(AX), Y1
	VPBROADCASTD 8(AX), Y2
	VPBROADCASTD 12(AX), Y3
	VPBROADCASTD 16(AX), Y4
	VPBROADCASTD 20(AX), Y5
	VPBROADCASTD 24(AX), Y6
	VPBROADCASTD 28(AX), Y7
	VPBROADCASTD 32(AX), Y8
	VPBROADCASTD 36(AX), Y9
	VPBROADCASTD 40(AX), Y10
	VPBROADCASTD 44(AX), Y11
	VMOVDQA32    Y31, Y12
	VPBROADCASTD 52(AX), Y13
	VPBROADCASTD 56(AX), Y14
	VPBROADCASTD 60(AX), Y15
	MOVQ         DX, BX

doubleround8:
	QR4Y(Y0, Y4, Y8, Y12, Y1, Y5, Y9, Y13, Y2, Y6, Y10, Y14, Y3, Y7, Y11, Y15)
	QR4Y(Y0, Y5, Y10, Y15, Y1, Y6, Y11, Y12, Y2, Y7, Y8, Y13, Y3, Y4, Y9, Y14)
	SUBQ $2, BX
	JNZ  doubleround8

	VPADDD.BCST 0(AX), Y0, Y0
	VPADDD.BCST 4(AX), Y1, Y1
	VPADDD.BCST 8(AX), Y2, Y2
	VPADDD.BCST 12(AX), Y3, Y3
	VPADDD.BCST 16(AX), Y4, Y4
	VPADDD.BCST 20(AX), Y5, Y5
	VPADDD.BCST 24(AX), Y6, Y6
	VPADDD.BCST 28(AX), Y7, Y7
	VPADDD.BCST 32(AX), Y8, Y8
	VPADDD.BCST 36(AX), Y9, Y9
	VPADDD.BCST 40(AX), Y10, Y10
	VPADDD.BCST 44(AX), Y11, Y11
	VPADDD      Y31, Y12, Y12
	VPADDD.BCST 52(AX), Y13, Y13
	VPADDD.BCST 56(AX), Y14, Y14
	VPADDD.BCST 60(AX), Y15, Y15

	TRANSPOSE4Y(Y0, Y1, Y2, Y3, Y16, Y17, Y18, Y19)
	TRANSPOSE4Y(Y4, Y5, Y6, Y7, Y20, Y21, Y22, Y23)
	TRANSPOSE4Y(Y8, Y9, Y10, Y11, Y16, Y17, Y18, Y19)
	TRANSPOSE4Y(Y12, Y13, Y14, Y15, Y20, Y21, Y22, Y23)
	HALFY(Y0, Y4, 0, 0)
	HALFY(Y1, Y5, 1, 0)
	HALFY(Y2, Y6, 2, 0)
	HALFY(Y3, Y7, 3, 0)
	HALFY(Y8, Y12, 0, 32)
	HALFY(Y9, Y13, 1, 32)
	HALFY(Y10, Y14, 2, 32)
	HALFY(Y11, Y15, 3, 32)

	VPADDD.BCST eight32<>(SB), Y31, Y31
	ADDQ        $512, SI
	ADDQ        $512, DI
	DECQ        CX
	JNZ         group8

	// Leave no key stream in the vector registers.
	VPXORD Y0, Y0, Y0
	VPXORD Y1, Y1, Y1
	VPXORD Y2, Y2, Y2
	VPXORD Y3, Y3, Y3
	VPXORD Y4, Y4, Y4
	VPXORD Y5, Y5, Y5
	VPXORD Y6, Y6, Y6
	VPXORD Y7, Y7, Y7
	VPXORD Y8, Y8, Y8
	VPXORD Y9, Y9, Y9
	VPXORD Y10, Y10, Y10
	VPXORD Y11, Y11, Y11
	VPXORD Y12, Y12, Y12
	VPXORD Y13, Y13, Y13
	VPXORD Y14, Y14, Y14
	VPXORD Y15, Y15, Y15
	VPXORD Y24, Y24, Y24
	VPXORD Y25, Y25, Y25
	VZEROUPPER
	RET

DATA eight32<>+0x00(SB)/4, $8
GLOBL eight32<>(SB), RODATA|NOPTR, $4
