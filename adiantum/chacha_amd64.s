//go:build amd64 && gc && !purego

#include "textflag.h"

// ChaCha, eight blocks at a time with AVX2. Register Yi holds state word i
// of all eight blocks (lane j is block j). Rotations by 16 and 8 are byte
// shuffles; those by 12 and 7 need a scratch register, so one "d" word is
// spilled to the stack around them.
//
// Frame layout:
//   0(SP)   .. 511(SP)  the initial state, word i broadcast at 32*i
//   512(SP) .. 767(SP)  words 8..15 while words 0..7 are written out
//   768(SP) .. 799(SP)  spill slot

DATA rol16<>+0x00(SB)/8, $0x0504070601000302
DATA rol16<>+0x08(SB)/8, $0x0D0C0F0E09080B0A
DATA rol16<>+0x10(SB)/8, $0x0504070601000302
DATA rol16<>+0x18(SB)/8, $0x0D0C0F0E09080B0A
GLOBL rol16<>(SB), RODATA|NOPTR, $32

DATA rol8<>+0x00(SB)/8, $0x0605040702010003
DATA rol8<>+0x08(SB)/8, $0x0E0D0C0F0A09080B
DATA rol8<>+0x10(SB)/8, $0x0605040702010003
DATA rol8<>+0x18(SB)/8, $0x0E0D0C0F0A09080B
GLOBL rol8<>(SB), RODATA|NOPTR, $32

DATA lanes<>+0x00(SB)/8, $0x0000000100000000
DATA lanes<>+0x08(SB)/8, $0x0000000300000002
DATA lanes<>+0x10(SB)/8, $0x0000000500000004
DATA lanes<>+0x18(SB)/8, $0x0000000700000006
GLOBL lanes<>(SB), RODATA|NOPTR, $32

DATA eight<>+0x00(SB)/8, $0x0000000800000008
DATA eight<>+0x08(SB)/8, $0x0000000800000008
DATA eight<>+0x10(SB)/8, $0x0000000800000008
DATA eight<>+0x18(SB)/8, $0x0000000800000008
GLOBL eight<>(SB), RODATA|NOPTR, $32

// ROTL rotates each 32-bit lane of r left by n, using t as scratch.
#define ROTL(r, n, t) \
	VPSLLD $n, r, t;      \
	VPSRLD $(32-n), r, r; \
	VPOR   t, r, r

// QR4 runs four independent quarter rounds (a_i, b_i, c_i, d_i). d3 is
// spilled while the b words rotate by 12 and 7.
#define QR4(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	VPADDD  b0, a0, a0;               \
	VPADDD  b1, a1, a1;               \
	VPADDD  b2, a2, a2;               \
	VPADDD  b3, a3, a3;               \
	VPXOR   a0, d0, d0;               \
	VPXOR   a1, d1, d1;               \
	VPXOR   a2, d2, d2;               \
	VPXOR   a3, d3, d3;               \
	VPSHUFB rol16<>(SB), d0, d0;      \
	VPSHUFB rol16<>(SB), d1, d1;      \
	VPSHUFB rol16<>(SB), d2, d2;      \
	VPSHUFB rol16<>(SB), d3, d3;      \
	VPADDD  d0, c0, c0;               \
	VPADDD  d1, c1, c1;               \
	VPADDD  d2, c2, c2;               \
	VPADDD  d3, c3, c3;               \
	VPXOR   c0, b0, b0;               \
	VPXOR   c1, b1, b1;               \
	VPXOR   c2, b2, b2;               \
	VPXOR   c3, b3, b3;               \
	VMOVDQU d3, 768(SP);              \
	ROTL(b0, 12, d3);                 \
	ROTL(b1, 12, d3);                 \
	ROTL(b2, 12, d3);                 \
	ROTL(b3, 12, d3);                 \
	VMOVDQU 768(SP), d3;              \
	VPADDD  b0, a0, a0;               \
	VPADDD  b1, a1, a1;               \
	VPADDD  b2, a2, a2;               \
	VPADDD  b3, a3, a3;               \
	VPXOR   a0, d0, d0;               \
	VPXOR   a1, d1, d1;               \
	VPXOR   a2, d2, d2;               \
	VPXOR   a3, d3, d3;               \
	VPSHUFB rol8<>(SB), d0, d0;       \
	VPSHUFB rol8<>(SB), d1, d1;       \
	VPSHUFB rol8<>(SB), d2, d2;       \
	VPSHUFB rol8<>(SB), d3, d3;       \
	VPADDD  d0, c0, c0;               \
	VPADDD  d1, c1, c1;               \
	VPADDD  d2, c2, c2;               \
	VPADDD  d3, c3, c3;               \
	VPXOR   c0, b0, b0;               \
	VPXOR   c1, b1, b1;               \
	VPXOR   c2, b2, b2;               \
	VPXOR   c3, b3, b3;               \
	VMOVDQU d3, 768(SP);              \
	ROTL(b0, 7, d3);                  \
	ROTL(b1, 7, d3);                  \
	ROTL(b2, 7, d3);                  \
	ROTL(b3, 7, d3);                  \
	VMOVDQU 768(SP), d3

// TRANSPOSE4 turns four registers holding words w..w+3 of blocks 0-7 into
// r0 = block 0 | block 4, r1 = block 1 | block 5, r2 = 2 | 6, r3 = 3 | 7,
// each lane holding the four words in order. t0-t3 are scratch.
#define TRANSPOSE4(r0, r1, r2, r3, t0, t1, t2, t3) \
	VPUNPCKLDQ  r1, r0, t0; \
	VPUNPCKHDQ  r1, r0, t1; \
	VPUNPCKLDQ  r3, r2, t2; \
	VPUNPCKHDQ  r3, r2, t3; \
	VPUNPCKLQDQ t2, t0, r0; \
	VPUNPCKHQDQ t2, t0, r1; \
	VPUNPCKLQDQ t3, t1, r2; \
	VPUNPCKHQDQ t3, t1, r3

// XORHALF writes 32 bytes of blocks b and b+4 at byte offset off of each
// block: lo holds words of block b | b+4 for the first 16 bytes, hi for
// the next 16. t is scratch.
#define XORHALF(lo, hi, b, off, t) \
	VPERM2I128 $0x20, hi, lo, t;           \
	VPXOR      (64*b+off)(SI), t, t;       \
	VMOVDQU    t, (64*b+off)(DI);          \
	VPERM2I128 $0x31, hi, lo, t;           \
	VPXOR      (64*(b+4)+off)(SI), t, t;   \
	VMOVDQU    t, (64*(b+4)+off)(DI)

// func chachaXOR8AVX2(s *[16]uint32, dst, src *byte, groups int, rounds int)
TEXT ·chachaXOR8AVX2(SB), 0, $800-40
	MOVQ s+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ rounds+32(FP), DX

	VPBROADCASTD 0(AX), Y0
	VMOVDQU      Y0, 0(SP)
	VPBROADCASTD 4(AX), Y0
	VMOVDQU      Y0, 32(SP)
	VPBROADCASTD 8(AX), Y0
	VMOVDQU      Y0, 64(SP)
	VPBROADCASTD 12(AX), Y0
	VMOVDQU      Y0, 96(SP)
	VPBROADCASTD 16(AX), Y0
	VMOVDQU      Y0, 128(SP)
	VPBROADCASTD 20(AX), Y0
	VMOVDQU      Y0, 160(SP)
	VPBROADCASTD 24(AX), Y0
	VMOVDQU      Y0, 192(SP)
	VPBROADCASTD 28(AX), Y0
	VMOVDQU      Y0, 224(SP)
	VPBROADCASTD 32(AX), Y0
	VMOVDQU      Y0, 256(SP)
	VPBROADCASTD 36(AX), Y0
	VMOVDQU      Y0, 288(SP)
	VPBROADCASTD 40(AX), Y0
	VMOVDQU      Y0, 320(SP)
	VPBROADCASTD 44(AX), Y0
	VMOVDQU      Y0, 352(SP)
	VPBROADCASTD 48(AX), Y0
	VPADDD       lanes<>(SB), Y0, Y0
	VMOVDQU      Y0, 384(SP)
	VPBROADCASTD 52(AX), Y0
	VMOVDQU      Y0, 416(SP)
	VPBROADCASTD 56(AX), Y0
	VMOVDQU      Y0, 448(SP)
	VPBROADCASTD 60(AX), Y0
	VMOVDQU      Y0, 480(SP)

group:
	VMOVDQU 0(SP), Y0
	VMOVDQU 32(SP), Y1
	VMOVDQU 64(SP), Y2
	VMOVDQU 96(SP), Y3
	VMOVDQU 128(SP), Y4
	VMOVDQU 160(SP), Y5
	VMOVDQU 192(SP), Y6
	VMOVDQU 224(SP), Y7
	VMOVDQU 256(SP), Y8
	VMOVDQU 288(SP), Y9
	VMOVDQU 320(SP), Y10
	VMOVDQU 352(SP), Y11
	VMOVDQU 384(SP), Y12
	VMOVDQU 416(SP), Y13
	VMOVDQU 448(SP), Y14
	VMOVDQU 480(SP), Y15
	MOVQ    DX, BX

doubleround:
	QR4(Y0, Y4, Y8, Y12, Y1, Y5, Y9, Y13, Y2, Y6, Y10, Y14, Y3, Y7, Y11, Y15)
	QR4(Y1, Y6, Y11, Y12, Y2, Y7, Y8, Y13, Y3, Y4, Y9, Y14, Y0, Y5, Y10, Y15)
	SUBQ $2, BX
	JNZ  doubleround

	VPADDD 0(SP), Y0, Y0
	VPADDD 32(SP), Y1, Y1
	VPADDD 64(SP), Y2, Y2
	VPADDD 96(SP), Y3, Y3
	VPADDD 128(SP), Y4, Y4
	VPADDD 160(SP), Y5, Y5
	VPADDD 192(SP), Y6, Y6
	VPADDD 224(SP), Y7, Y7
	VPADDD 256(SP), Y8, Y8
	VPADDD 288(SP), Y9, Y9
	VPADDD 320(SP), Y10, Y10
	VPADDD 352(SP), Y11, Y11
	VPADDD 384(SP), Y12, Y12
	VPADDD 416(SP), Y13, Y13
	VPADDD 448(SP), Y14, Y14
	VPADDD 480(SP), Y15, Y15

	// Words 8..15 wait on the stack while words 0..7 go out.
	VMOVDQU Y8, 512(SP)
	VMOVDQU Y9, 544(SP)
	VMOVDQU Y10, 576(SP)
	VMOVDQU Y11, 608(SP)
	VMOVDQU Y12, 640(SP)
	VMOVDQU Y13, 672(SP)
	VMOVDQU Y14, 704(SP)
	VMOVDQU Y15, 736(SP)

	TRANSPOSE4(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11)
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y12, Y13, Y14, Y15)
	XORHALF(Y0, Y4, 0, 0, Y8)
	XORHALF(Y1, Y5, 1, 0, Y8)
	XORHALF(Y2, Y6, 2, 0, Y8)
	XORHALF(Y3, Y7, 3, 0, Y8)

	VMOVDQU 512(SP), Y0
	VMOVDQU 544(SP), Y1
	VMOVDQU 576(SP), Y2
	VMOVDQU 608(SP), Y3
	VMOVDQU 640(SP), Y4
	VMOVDQU 672(SP), Y5
	VMOVDQU 704(SP), Y6
	VMOVDQU 736(SP), Y7
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11)
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y12, Y13, Y14, Y15)
	XORHALF(Y0, Y4, 0, 32, Y8)
	XORHALF(Y1, Y5, 1, 32, Y8)
	XORHALF(Y2, Y6, 2, 32, Y8)
	XORHALF(Y3, Y7, 3, 32, Y8)

	VMOVDQU 384(SP), Y0
	VPADDD  eight<>(SB), Y0, Y0
	VMOVDQU Y0, 384(SP)
	ADDQ    $512, SI
	ADDQ    $512, DI
	DECQ    CX
	JNZ     group

	// Leave no key stream on the stack.
	VPXOR   Y0, Y0, Y0
	MOVQ    $0, BX
clear:
	VMOVDQU Y0, (SP)(BX*1)
	ADDQ    $32, BX
	CMPQ    BX, $800
	JB      clear
	VZEROUPPER
	RET
