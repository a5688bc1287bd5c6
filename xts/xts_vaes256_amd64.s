//go:build !purego

#include "textflag.h"

// VAES on 256-bit vectors (AVX2), for CPUs with VAES but without AVX-512:
// 16 blocks in flight in Y0-Y7, two per register. The tweaks of the current
// 16 blocks are on the stack at R11 (block k's at 16*k), those of the next
// 16 are computed into R12 between the rounds: each pair times x^16, a
// two-byte shift of each lane with the bits shifted out folded back by
// VPCLMULQDQ with 0x87 (Y14).

DATA vmask<>+0(SB)/8, $0x0000000000000087
DATA vmask<>+8(SB)/8, $0x0000000000000001
GLOBL vmask<>(SB), RODATA|NOPTR, $16

DATA vpoly<>+0(SB)/8, $0x0000000000000087
DATA vpoly<>+8(SB)/8, $0x0000000000000000
GLOBL vpoly<>(SB), RODATA|NOPTR, $16

// VMULX multiplies the tweak in T by x (see MULX in xts_amd64.s).
#define VMULX(T, TMP, MASK) \
	VPSHUFD $0x13, T, TMP  \
	VPSRAD  $31, TMP, TMP  \
	VPAND   MASK, TMP, TMP \
	VPADDQ  T, T, T        \
	VPXOR   TMP, T, T

// YSHL sets T to the two tweaks in S times x^s, s < 56.
#define YSHL(T, S, s, rs) \
	VPSRLQ     $rs, S, Y9         \
	VPSLLQ     $s, S, T           \
	VPCLMULQDQ $0x01, Y14, Y9, Y10 \
	VPSLLDQ    $8, Y9, Y9         \
	VPXOR      Y9, T, T           \
	VPXOR      Y10, T, T

// YTWSTEP sets pair j of the next set to pair j of the current one times
// x^16.
#define YTWSTEP(j) \
	VMOVDQU    j*32(R11), Y9       \
	VPSRLDQ    $14, Y9, Y10        \
	VPSLLDQ    $2, Y9, Y9          \
	VPCLMULQDQ $0x00, Y14, Y10, Y11 \
	VPXOR      Y11, Y9, Y9         \
	VMOVDQU    Y9, j*32(R12)

#define YLOAD(j, Y) \
	VMOVDQU j*32(SI), Y        \
	VPXOR   j*32(R11), Y, Y    \
	VPXOR   Y8, Y, Y

#define YSTORE(LAST, j, Y) \
	LAST    Y8, Y, Y           \
	VPXOR   j*32(R11), Y, Y    \
	VMOVDQU Y, j*32(DI)

#define YROUND8(OP, off) \
	VBROADCASTI128 off(R8), Y8 \
	OP Y8, Y0, Y0              \
	OP Y8, Y1, Y1              \
	OP Y8, Y2, Y2              \
	OP Y8, Y3, Y3              \
	OP Y8, Y4, Y4              \
	OP Y8, Y5, Y5              \
	OP Y8, Y6, Y6              \
	OP Y8, Y7, Y7

// YBODY8 runs all but the last round on Y0-Y7 (R8 at round key 1, CX the
// rounds), computing the next tweaks in between, and leaves the last round
// key in Y8.
#define YBODY8(OP, L128, L192) \
	CMPQ CX, $12       \
	JB   L128          \
	JEQ  L192          \
	YROUND8(OP, 0)     \
	YROUND8(OP, 16)    \
	ADDQ $32, R8       \
L192:                  \
	YROUND8(OP, 0)     \
	YROUND8(OP, 16)    \
	ADDQ $32, R8       \
L128:                  \
	YROUND8(OP, 0)     \
	YTWSTEP(0)         \
	YROUND8(OP, 16)    \
	YTWSTEP(1)         \
	YROUND8(OP, 32)    \
	YTWSTEP(2)         \
	YROUND8(OP, 48)    \
	YTWSTEP(3)         \
	YROUND8(OP, 64)    \
	YTWSTEP(4)         \
	YROUND8(OP, 80)    \
	YTWSTEP(5)         \
	YROUND8(OP, 96)    \
	YTWSTEP(6)         \
	YROUND8(OP, 112)   \
	YTWSTEP(7)         \
	YROUND8(OP, 128)   \
	VBROADCASTI128 144(R8), Y8

#define XROUND1(OP, off) \
	VMOVDQU off(R8), X8 \
	OP X8, X0, X0

#define XBODY1(OP, LAST, L128, L192) \
	CMPQ CX, $12        \
	JB   L128           \
	JEQ  L192           \
	XROUND1(OP, 0)      \
	XROUND1(OP, 16)     \
	ADDQ $32, R8        \
L192:                   \
	XROUND1(OP, 0)      \
	XROUND1(OP, 16)     \
	ADDQ $32, R8        \
L128:                   \
	XROUND1(OP, 0)      \
	XROUND1(OP, 16)     \
	XROUND1(OP, 32)     \
	XROUND1(OP, 48)     \
	XROUND1(OP, 64)     \
	XROUND1(OP, 80)     \
	XROUND1(OP, 96)     \
	XROUND1(OP, 112)    \
	XROUND1(OP, 128)    \
	XROUND1(LAST, 144)

// XTSY is the kernel for one direction over one data unit: AX round keys,
// CX rounds, DI dst, SI src, DX blocks, BX the tweak (replaced by the one
// of the block after the last). It leaves DI and SI past the unit.
#define XTSY(OP, LAST, L16, L16a, L16b, LTAIL, L1, L1a, L1b, LDONE) \
	MOVQ  SP, R11                       \
	LEAQ  256(SP), R12                  \
	VBROADCASTI128 vpoly<>(SB), Y14     \
	VMOVDQU vmask<>(SB), X13            \
	VMOVDQU (BX), X0                    \
	VMOVDQU X0, X1                      \
	VMULX(X1, X9, X13)                  \
	VINSERTI128 $1, X1, Y0, Y0          \
	VMOVDQU Y0, 0(R11)                  \
	YSHL(Y1, Y0, 2, 62)                 \
	VMOVDQU Y1, 32(R11)                 \
	YSHL(Y2, Y0, 4, 60)                 \
	VMOVDQU Y2, 64(R11)                 \
	YSHL(Y3, Y0, 6, 58)                 \
	VMOVDQU Y3, 96(R11)                 \
	YSHL(Y4, Y0, 8, 56)                 \
	VMOVDQU Y4, 128(R11)                \
	YSHL(Y5, Y0, 10, 54)                \
	VMOVDQU Y5, 160(R11)                \
	YSHL(Y6, Y0, 12, 52)                \
	VMOVDQU Y6, 192(R11)                \
	YSHL(Y7, Y0, 14, 50)                \
	VMOVDQU Y7, 224(R11)                \
L16:                                    \
	CMPQ  DX, $16                       \
	JB    LTAIL                         \
	VBROADCASTI128 (AX), Y8             \
	YLOAD(0, Y0)                        \
	YLOAD(1, Y1)                        \
	YLOAD(2, Y2)                        \
	YLOAD(3, Y3)                        \
	YLOAD(4, Y4)                        \
	YLOAD(5, Y5)                        \
	YLOAD(6, Y6)                        \
	YLOAD(7, Y7)                        \
	LEAQ  16(AX), R8                    \
	YBODY8(OP, L16a, L16b)              \
	YSTORE(LAST, 0, Y0)                 \
	YSTORE(LAST, 1, Y1)                 \
	YSTORE(LAST, 2, Y2)                 \
	YSTORE(LAST, 3, Y3)                 \
	YSTORE(LAST, 4, Y4)                 \
	YSTORE(LAST, 5, Y5)                 \
	YSTORE(LAST, 6, Y6)                 \
	YSTORE(LAST, 7, Y7)                 \
	XCHGQ R11, R12                      \
	ADDQ  $256, SI                      \
	ADDQ  $256, DI                      \
	SUBQ  $16, DX                       \
	JMP   L16                           \
LTAIL:                                  \
	XORQ  R13, R13                      \
L1:                                     \
	TESTQ DX, DX                        \
	JZ    LDONE                         \
	VMOVDQU (SI), X0                    \
	VPXOR (R11)(R13*1), X0, X0          \
	VPXOR (AX), X0, X0                  \
	LEAQ  16(AX), R8                    \
	XBODY1(OP, LAST, L1a, L1b)          \
	VPXOR (R11)(R13*1), X0, X0          \
	VMOVDQU X0, (DI)                    \
	ADDQ  $16, R13                      \
	ADDQ  $16, SI                       \
	ADDQ  $16, DI                       \
	DECQ  DX                            \
	JMP   L1                            \
LDONE:                                  \
	VMOVDQU (R11)(R13*1), X0            \
	VMOVDQU X0, (BX)

#define YARGS \
	MOVQ rk+0(FP), AX     \
	MOVQ rounds+8(FP), CX \
	MOVQ dst+16(FP), DI   \
	MOVQ src+24(FP), SI   \
	MOVQ n+32(FP), DX     \
	MOVQ tweak+40(FP), BX

// YSECTORARGS: R9 sectors of R10 blocks each, in place at DI = SI, their
// encrypted tweaks one after the other at BX.
#define YSECTORARGS \
	MOVQ rk+0(FP), AX       \
	MOVQ rounds+8(FP), CX   \
	MOVQ buf+16(FP), DI     \
	MOVQ DI, SI             \
	MOVQ blocks+24(FP), R10 \
	MOVQ sectors+32(FP), R9 \
	MOVQ tweaks+40(FP), BX

// func encryptVAES256(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·encryptVAES256(SB), NOSPLIT, $512-48
	YARGS
	XTSY(VAESENC, VAESENCLAST, yenc16, yenc16a, yenc16b, yenctail, yenc1, yenc1a, yenc1b, yencdone)
	VZEROUPPER
	RET

// func decryptVAES256(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·decryptVAES256(SB), NOSPLIT, $512-48
	YARGS
	XTSY(VAESDEC, VAESDECLAST, ydec16, ydec16a, ydec16b, ydectail, ydec1, ydec1a, ydec1b, ydecdone)
	VZEROUPPER
	RET

// func encryptSectorsVAES256(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·encryptSectorsVAES256(SB), NOSPLIT, $512-48
	YSECTORARGS
ysencnext:
	MOVQ R10, DX
	XTSY(VAESENC, VAESENCLAST, ysenc16, ysenc16a, ysenc16b, ysenctail, ysenc1, ysenc1a, ysenc1b, ysencdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  ysencnext
	VZEROUPPER
	RET

// func decryptSectorsVAES256(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·decryptSectorsVAES256(SB), NOSPLIT, $512-48
	YSECTORARGS
ysdecnext:
	MOVQ R10, DX
	XTSY(VAESDEC, VAESDECLAST, ysdec16, ysdec16a, ysdec16b, ysdectail, ysdec1, ysdec1a, ysdec1b, ysdecdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  ysdecnext
	VZEROUPPER
	RET

// func cpuid7ecx() uint32
TEXT ·cpuid7ecx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
