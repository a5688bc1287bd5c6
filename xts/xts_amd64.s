//go:build !purego

#include "textflag.h"

// XTS tweak multiplication by x, in one 128-bit lane: doubling each qword
// with PADDQ drops bit 63 of the low qword (carried into bit 64 by the mask's
// 1) and bit 127 (folded back as 0x87). PSHUFD $0x13 copies dword 3 to lane
// 0 and dword 1 to lane 2, PSRAL turns their sign bits into masks.
DATA xtsmask<>+0(SB)/8, $0x0000000000000087
DATA xtsmask<>+8(SB)/8, $0x0000000000000001
GLOBL xtsmask<>(SB), RODATA|NOPTR, $16

// The polynomial's low byte, for VPCLMULQDQ, in every 128-bit lane.
DATA xtspoly<>+0(SB)/8, $0x0000000000000087
DATA xtspoly<>+8(SB)/8, $0x0000000000000000
GLOBL xtspoly<>(SB), RODATA|NOPTR, $16

// Per-qword shift counts that turn four copies of a tweak T into T, Tx,
// Tx^2, Tx^3 (see ZMULXS; a count of 64 shifts everything out).
DATA xtsshl<>+0(SB)/8, $0
DATA xtsshl<>+8(SB)/8, $0
DATA xtsshl<>+16(SB)/8, $1
DATA xtsshl<>+24(SB)/8, $1
DATA xtsshl<>+32(SB)/8, $2
DATA xtsshl<>+40(SB)/8, $2
DATA xtsshl<>+48(SB)/8, $3
DATA xtsshl<>+56(SB)/8, $3
GLOBL xtsshl<>(SB), RODATA|NOPTR, $64
DATA xtsshr<>+0(SB)/8, $64
DATA xtsshr<>+8(SB)/8, $64
DATA xtsshr<>+16(SB)/8, $63
DATA xtsshr<>+24(SB)/8, $63
DATA xtsshr<>+32(SB)/8, $62
DATA xtsshr<>+40(SB)/8, $62
DATA xtsshr<>+48(SB)/8, $61
DATA xtsshr<>+56(SB)/8, $61
GLOBL xtsshr<>(SB), RODATA|NOPTR, $64

#define MULX(T, TMP, MASK) \
	PSHUFD $0x13, T, TMP \
	PSRAL  $31, TMP      \
	PAND   MASK, TMP     \
	PADDQ  T, T          \
	PXOR   TMP, T

// TWSTEP saves the running tweak X15 as tweak i of the set at base and
// advances it.
#define TWSTEP(i, base) \
	MOVOU X15, i*16(base) \
	MULX(X15, X13, X14)

// LOADX loads block i of src and whitens it with its tweak, from the set at
// R11, and the first round key (X12).
#define LOADX(i, X) \
	MOVOU i*16(SI), X   \
	MOVOU i*16(R11), X13 \
	PXOR  X13, X        \
	PXOR  X12, X

#define STOREX(i, X) \
	MOVOU i*16(R11), X13 \
	PXOR  X13, X         \
	MOVOU X, i*16(DI)

#define ROUND8(OP, off) \
	MOVOU off(R8), X12 \
	OP    X12, X0      \
	OP    X12, X1      \
	OP    X12, X2      \
	OP    X12, X3      \
	OP    X12, X4      \
	OP    X12, X5      \
	OP    X12, X6      \
	OP    X12, X7

#define ROUND1(OP, off) \
	MOVOU off(R8), X12 \
	OP    X12, X0

// The rounds of eight blocks in X0-X7 after whitening: R8 points at round
// key 1 and CX holds the number of rounds. The next eight tweaks are
// computed into the set at R12 between the rounds, where the AES units are
// busy and the other ports idle.
#define BODY8(OP, LAST, L128, L192) \
	CMPQ CX, $12          \
	JB   L128             \
	JEQ  L192             \
	ROUND8(OP, 0)         \
	ROUND8(OP, 16)        \
	ADDQ $32, R8          \
L192:                     \
	ROUND8(OP, 0)         \
	ROUND8(OP, 16)        \
	ADDQ $32, R8          \
L128:                     \
	ROUND8(OP, 0)         \
	TWSTEP(0, R12)        \
	ROUND8(OP, 16)        \
	TWSTEP(1, R12)        \
	ROUND8(OP, 32)        \
	TWSTEP(2, R12)        \
	ROUND8(OP, 48)        \
	TWSTEP(3, R12)        \
	ROUND8(OP, 64)        \
	TWSTEP(4, R12)        \
	ROUND8(OP, 80)        \
	TWSTEP(5, R12)        \
	ROUND8(OP, 96)        \
	TWSTEP(6, R12)        \
	ROUND8(OP, 112)       \
	TWSTEP(7, R12)        \
	ROUND8(OP, 128)       \
	ROUND8(LAST, 144)

#define BODY1(OP, LAST, L128, L192) \
	CMPQ CX, $12          \
	JB   L128             \
	JEQ  L192             \
	ROUND1(OP, 0)         \
	ROUND1(OP, 16)        \
	ADDQ $32, R8          \
L192:                     \
	ROUND1(OP, 0)         \
	ROUND1(OP, 16)        \
	ADDQ $32, R8          \
L128:                     \
	ROUND1(OP, 0)         \
	ROUND1(OP, 16)        \
	ROUND1(OP, 32)        \
	ROUND1(OP, 48)        \
	ROUND1(OP, 64)        \
	ROUND1(OP, 80)        \
	ROUND1(OP, 96)        \
	ROUND1(OP, 112)       \
	ROUND1(OP, 128)       \
	ROUND1(LAST, 144)

// XTSNI is the AES-NI kernel for one direction over one data unit: AX
// round keys, CX rounds, DI dst, SI src, DX blocks, BX the tweak, X14 the
// mask of MULX. It leaves DI and SI past the unit. Eight blocks are in
// flight, their tweaks in the set at R11 on the stack, while the rounds
// interleave the computing of the next eight tweaks into the set at R12.
#define XTSNI(OP, LAST, L8, L8a, L8b, LTAIL, L1, L1a, L1b, LDONE) \
	MOVOU (BX), X15             \
	MOVQ  SP, R11               \
	LEAQ  128(SP), R12          \
	TWSTEP(0, R11)              \
	TWSTEP(1, R11)              \
	TWSTEP(2, R11)              \
	TWSTEP(3, R11)              \
	TWSTEP(4, R11)              \
	TWSTEP(5, R11)              \
	TWSTEP(6, R11)              \
	TWSTEP(7, R11)              \
L8:                             \
	CMPQ  DX, $8                \
	JB    LTAIL                 \
	MOVOU (AX), X12             \
	LOADX(0, X0)                \
	LOADX(1, X1)                \
	LOADX(2, X2)                \
	LOADX(3, X3)                \
	LOADX(4, X4)                \
	LOADX(5, X5)                \
	LOADX(6, X6)                \
	LOADX(7, X7)                \
	LEAQ  16(AX), R8            \
	BODY8(OP, LAST, L8a, L8b)   \
	STOREX(0, X0)               \
	STOREX(1, X1)               \
	STOREX(2, X2)               \
	STOREX(3, X3)               \
	STOREX(4, X4)               \
	STOREX(5, X5)               \
	STOREX(6, X6)               \
	STOREX(7, X7)               \
	XCHGQ R11, R12              \
	ADDQ  $128, SI              \
	ADDQ  $128, DI              \
	SUBQ  $8, DX                \
	JMP   L8                    \
LTAIL:                          \
	MOVOU (R11), X15            \
L1:                             \
	TESTQ DX, DX                \
	JZ    LDONE                 \
	MOVOU (SI), X0              \
	PXOR  X15, X0               \
	MOVOU (AX), X12             \
	PXOR  X12, X0               \
	LEAQ  16(AX), R8            \
	BODY1(OP, LAST, L1a, L1b)   \
	PXOR  X15, X0               \
	MOVOU X0, (DI)              \
	MULX(X15, X13, X14)         \
	ADDQ  $16, SI               \
	ADDQ  $16, DI               \
	DECQ  DX                    \
	JMP   L1                    \
LDONE:                          \
	MOVOU X15, (BX)

// ZMULXS multiplies the four tweaks in T by x^s (s < 56): each 128-bit lane
// is shifted left by s, the bits carried out of the low qword move to the
// high one, and those out of the high qword are folded back as their
// carry-less product with 0x87 (Z17).
#define ZMULXS(T, s, rs, T1, T2) \
	VPSRLQ     $rs, T, T1         \
	VPSLLQ     $s, T, T           \
	VPCLMULQDQ $0x01, Z17, T1, T2 \
	VPSLLDQ    $8, T1, T1         \
	VPTERNLOGD $0x96, T1, T2, T

// ZFROM sets T to the tweaks in Z8 times x^s, so that the eight vectors of
// tweaks are computed side by side rather than in a chain.
#define ZFROM(T, s, rs, T1, T2) \
	VPSRLQ     $rs, Z8, T1        \
	VPSLLQ     $s, Z8, T          \
	VPCLMULQDQ $0x01, Z17, T1, T2 \
	VPSLLDQ    $8, T1, T1         \
	VPTERNLOGD $0x96, T1, T2, T

// ZMULXB sets T to the tweaks in S times x^(8b), b < 8: whole-byte shifts
// of each 128-bit lane, which run beside the AES rounds rather than on the
// port the bit shifts share with them.
#define ZMULXB(T, S, b, rb, T1, T2) \
	VPSRLDQ    $rb, S, T1         \
	VPSLLDQ    $b, S, T           \
	VPCLMULQDQ $0x00, Z17, T1, T2 \
	VPXORD     T2, T, T

// ZLOAD loads four blocks and whitens them with their tweaks and round key 0
// (Z16).
#define ZLOAD(off, X, T) \
	VMOVDQU64  off(SI), X \
	VPTERNLOGD $0x96, Z16, T, X

// ZLAST does the last round with the round key in Z16 merged with the
// tweaks (the last round ends by adding its key), and stores the blocks.
#define ZLAST(LAST, off, X, T, TMP) \
	VPXORD    T, Z16, TMP \
	LAST      TMP, X, X   \
	VMOVDQU64 X, off(DI)

#define ZROUND8(OP, off) \
	VBROADCASTI32X4 off(R8), Z16 \
	OP Z16, Z0, Z0               \
	OP Z16, Z1, Z1               \
	OP Z16, Z2, Z2               \
	OP Z16, Z3, Z3               \
	OP Z16, Z4, Z4               \
	OP Z16, Z5, Z5               \
	OP Z16, Z6, Z6               \
	OP Z16, Z7, Z7

#define ZROUND1(OP, off) \
	VBROADCASTI32X4 off(R8), Z16 \
	OP Z16, Z0, Z0

// ZBODY8 runs all but the last round on Z0-Z7, R8 pointing at round key 1,
// and leaves the last round key in Z16.
#define ZBODY8(OP, L128, L192) \
	CMPQ CX, $12      \
	JB   L128         \
	JEQ  L192         \
	ZROUND8(OP, 0)    \
	ZROUND8(OP, 16)   \
	ADDQ $32, R8      \
L192:                 \
	ZROUND8(OP, 0)    \
	ZROUND8(OP, 16)   \
	ADDQ $32, R8      \
L128:                 \
	ZROUND8(OP, 0)    \
	ZROUND8(OP, 16)   \
	ZROUND8(OP, 32)   \
	ZROUND8(OP, 48)   \
	ZROUND8(OP, 64)   \
	ZROUND8(OP, 80)   \
	ZROUND8(OP, 96)   \
	ZROUND8(OP, 112)  \
	ZROUND8(OP, 128)  \
	VBROADCASTI32X4 144(R8), Z16

#define ZBODY1(OP, L128, L192) \
	CMPQ CX, $12      \
	JB   L128         \
	JEQ  L192         \
	ZROUND1(OP, 0)    \
	ZROUND1(OP, 16)   \
	ADDQ $32, R8      \
L192:                 \
	ZROUND1(OP, 0)    \
	ZROUND1(OP, 16)   \
	ADDQ $32, R8      \
L128:                 \
	ZROUND1(OP, 0)    \
	ZROUND1(OP, 16)   \
	ZROUND1(OP, 32)   \
	ZROUND1(OP, 48)   \
	ZROUND1(OP, 64)   \
	ZROUND1(OP, 80)   \
	ZROUND1(OP, 96)   \
	ZROUND1(OP, 112)  \
	ZROUND1(OP, 128)  \
	VBROADCASTI32X4 144(R8), Z16

// XTSV is the VAES kernel for one direction over one data unit of a
// multiple of four blocks, registers as for XTSNI and Z17 the polynomial:
// 32 blocks (eight vectors of four) in flight, then four at a time. Z8-Z15
// hold the tweaks of the next 32 blocks, Z8 lane 0 the next one.
#define XTSV(OP, LAST, L32, L32a, L32b, L4, L4a, L4b, LDONE) \
	VBROADCASTI32X4 (BX), Z8        \
	VMOVDQU64 xtsshr<>(SB), Z18     \
	VPSRLVQ   Z18, Z8, Z18          \
	VMOVDQU64 xtsshl<>(SB), Z19     \
	VPSLLVQ   Z19, Z8, Z8           \
	VPCLMULQDQ $0x01, Z17, Z18, Z19 \
	VPSLLDQ   $8, Z18, Z18          \
	VPTERNLOGD $0x96, Z18, Z19, Z8  \
	ZFROM(Z9, 4, 60, Z18, Z19)      \
	ZMULXB(Z10, Z8, 1, 15, Z20, Z21) \
	ZMULXB(Z11, Z9, 1, 15, Z22, Z23) \
	ZMULXB(Z12, Z8, 2, 14, Z24, Z25) \
	ZMULXB(Z13, Z9, 2, 14, Z26, Z27) \
	ZMULXB(Z14, Z8, 3, 13, Z28, Z29) \
	ZMULXB(Z15, Z9, 3, 13, Z30, Z31) \
L32:                                \
	CMPQ  DX, $32                   \
	JB    L4                        \
	VBROADCASTI32X4 (AX), Z16       \
	ZLOAD(0, Z0, Z8)                \
	ZLOAD(64, Z1, Z9)               \
	ZLOAD(128, Z2, Z10)             \
	ZLOAD(192, Z3, Z11)             \
	ZLOAD(256, Z4, Z12)             \
	ZLOAD(320, Z5, Z13)             \
	ZLOAD(384, Z6, Z14)             \
	ZLOAD(448, Z7, Z15)             \
	LEAQ  16(AX), R8                \
	ZBODY8(OP, L32a, L32b)          \
	ZLAST(LAST, 0, Z0, Z8, Z18)     \
	ZLAST(LAST, 64, Z1, Z9, Z19)    \
	ZLAST(LAST, 128, Z2, Z10, Z20)  \
	ZLAST(LAST, 192, Z3, Z11, Z21)  \
	ZLAST(LAST, 256, Z4, Z12, Z22)  \
	ZLAST(LAST, 320, Z5, Z13, Z23)  \
	ZLAST(LAST, 384, Z6, Z14, Z24)  \
	ZLAST(LAST, 448, Z7, Z15, Z25)  \
	ADDQ  $512, SI                  \
	ADDQ  $512, DI                  \
	SUBQ  $32, DX                   \
	ZMULXB(Z8, Z8, 4, 12, Z26, Z27) \
	CMPQ  DX, $32                   \
	JB    L4                        \
	ZMULXB(Z9, Z9, 4, 12, Z28, Z29) \
	ZMULXB(Z10, Z10, 4, 12, Z30, Z31) \
	ZMULXB(Z11, Z11, 4, 12, Z26, Z27) \
	ZMULXB(Z12, Z12, 4, 12, Z28, Z29) \
	ZMULXB(Z13, Z13, 4, 12, Z30, Z31) \
	ZMULXB(Z14, Z14, 4, 12, Z26, Z27) \
	ZMULXB(Z15, Z15, 4, 12, Z28, Z29) \
	JMP   L32                       \
L4:                                 \
	TESTQ DX, DX                    \
	JZ    LDONE                     \
	VBROADCASTI32X4 (AX), Z16       \
	ZLOAD(0, Z0, Z8)                \
	LEAQ  16(AX), R8                \
	ZBODY1(OP, L4a, L4b)            \
	ZLAST(LAST, 0, Z0, Z8, Z18)     \
	ZMULXS(Z8, 4, 60, Z26, Z27)     \
	ADDQ  $64, SI                   \
	ADDQ  $64, DI                   \
	SUBQ  $4, DX                    \
	JMP   L4                        \
LDONE:                              \
	VMOVDQU X8, (BX)

// ZSHL sets T to the tweaks in S times x^s, s < 56 (see ZMULXS).
#define ZSHL(T, S, s, rs, T1, T2) \
	VPSRLQ     $rs, S, T1         \
	VPSLLQ     $s, S, T           \
	VPCLMULQDQ $0x01, Z17, T1, T2 \
	VPSLLDQ    $8, T1, T1         \
	VPTERNLOGD $0x96, T1, T2, T

// TWEAKS32 sets T0-T7 to the tweaks of the 32 blocks of a data unit whose
// first tweak is at mem: four copies multiplied lane by lane by 1, x, x^2,
// x^3 (shift counts in Z22 and Z23), then the other vectors from the first
// two by x^8, x^16 and x^24.
#define TWEAKS32(mem, T0, T1, T2, T3, T4, T5, T6, T7) \
	VBROADCASTI32X4 mem, T0             \
	VPSRLVQ    Z22, T0, Z18             \
	VPSLLVQ    Z23, T0, T0              \
	VPCLMULQDQ $0x01, Z17, Z18, Z19     \
	VPSLLDQ    $8, Z18, Z18             \
	VPTERNLOGD $0x96, Z18, Z19, T0      \
	ZSHL(T1, T0, 4, 60, Z18, Z19)       \
	ZMULXB(T2, T0, 1, 15, Z18, Z19)     \
	ZMULXB(T3, T1, 1, 15, Z18, Z19)     \
	ZMULXB(T4, T0, 2, 14, Z18, Z19)     \
	ZMULXB(T5, T1, 2, 14, Z18, Z19)     \
	ZMULXB(T6, T0, 3, 13, Z18, Z19)     \
	ZMULXB(T7, T1, 3, 13, Z18, Z19)

// XTS512 runs the 512-byte sector kernel for one direction: AX round keys,
// CX rounds, DI the sectors, R9 how many, BX their encrypted tweaks plus one
// spare. The tweaks of the next sector (Z24-Z31) are computed while the
// current one's rounds run, so that no sector waits for its own.
#define XTS512(OP, LAST, LNEXT, La, Lb) \
	VBROADCASTI32X4 xtspoly<>(SB), Z17                 \
	VMOVDQU64 xtsshr<>(SB), Z22                        \
	VMOVDQU64 xtsshl<>(SB), Z23                        \
	TWEAKS32((BX), Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
LNEXT:                                                 \
	MOVQ DI, SI                                        \
	VBROADCASTI32X4 (AX), Z16                          \
	ZLOAD(0, Z0, Z8)                                   \
	ZLOAD(64, Z1, Z9)                                  \
	ZLOAD(128, Z2, Z10)                                \
	ZLOAD(192, Z3, Z11)                                \
	ZLOAD(256, Z4, Z12)                                \
	ZLOAD(320, Z5, Z13)                                \
	ZLOAD(384, Z6, Z14)                                \
	ZLOAD(448, Z7, Z15)                                \
	TWEAKS32(16(BX), Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31) \
	LEAQ 16(AX), R8                                    \
	ZBODY8(OP, La, Lb)                                 \
	ZLAST(LAST, 0, Z0, Z8, Z20)                        \
	ZLAST(LAST, 64, Z1, Z9, Z21)                       \
	ZLAST(LAST, 128, Z2, Z10, Z20)                     \
	ZLAST(LAST, 192, Z3, Z11, Z21)                     \
	ZLAST(LAST, 256, Z4, Z12, Z20)                     \
	ZLAST(LAST, 320, Z5, Z13, Z21)                     \
	ZLAST(LAST, 384, Z6, Z14, Z20)                     \
	ZLAST(LAST, 448, Z7, Z15, Z21)                     \
	VMOVDQA64 Z24, Z8                                  \
	VMOVDQA64 Z25, Z9                                  \
	VMOVDQA64 Z26, Z10                                 \
	VMOVDQA64 Z27, Z11                                 \
	VMOVDQA64 Z28, Z12                                 \
	VMOVDQA64 Z29, Z13                                 \
	VMOVDQA64 Z30, Z14                                 \
	VMOVDQA64 Z31, Z15                                 \
	ADDQ $512, DI                                      \
	ADDQ $16, BX                                       \
	DECQ R9                                            \
	JNZ  LNEXT                                         \
	VZEROUPPER                                         \
	RET

#define ARGS \
	MOVQ rk+0(FP), AX      \
	MOVQ rounds+8(FP), CX  \
	MOVQ dst+16(FP), DI    \
	MOVQ src+24(FP), SI    \
	MOVQ n+32(FP), DX      \
	MOVQ tweak+40(FP), BX

// SECTORARGS loads the arguments of the sector kernels: R9 sectors of R10
// blocks each, in place at DI = SI, their tweaks one after the other at BX.
#define SECTORARGS \
	MOVQ rk+0(FP), AX       \
	MOVQ rounds+8(FP), CX   \
	MOVQ buf+16(FP), DI     \
	MOVQ DI, SI             \
	MOVQ blocks+24(FP), R10 \
	MOVQ sectors+32(FP), R9 \
	MOVQ tweaks+40(FP), BX

// func encryptAESNI(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·encryptAESNI(SB), NOSPLIT, $256-48
	ARGS
	MOVOU xtsmask<>(SB), X14
	XTSNI(AESENC, AESENCLAST, enc8, enc8a, enc8b, enctail, enc1, enc1a, enc1b, encdone)
	RET

// func decryptAESNI(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·decryptAESNI(SB), NOSPLIT, $256-48
	ARGS
	MOVOU xtsmask<>(SB), X14
	XTSNI(AESDEC, AESDECLAST, dec8, dec8a, dec8b, dectail, dec1, dec1a, dec1b, decdone)
	RET

// func encryptSectorsAESNI(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·encryptSectorsAESNI(SB), NOSPLIT, $256-48
	SECTORARGS
	MOVOU xtsmask<>(SB), X14
sencnext:
	MOVQ R10, DX
	XTSNI(AESENC, AESENCLAST, senc8, senc8a, senc8b, senctail, senc1, senc1a, senc1b, sencdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  sencnext
	RET

// func decryptSectorsAESNI(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·decryptSectorsAESNI(SB), NOSPLIT, $256-48
	SECTORARGS
	MOVOU xtsmask<>(SB), X14
sdecnext:
	MOVQ R10, DX
	XTSNI(AESDEC, AESDECLAST, sdec8, sdec8a, sdec8b, sdectail, sdec1, sdec1a, sdec1b, sdecdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  sdecnext
	RET

// func encryptVAES(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·encryptVAES(SB), NOSPLIT, $0-48
	ARGS
	VBROADCASTI32X4 xtspoly<>(SB), Z17
	XTSV(VAESENC, VAESENCLAST, venc32, venc32a, venc32b, venc4, venc4a, venc4b, vencdone)
	VZEROUPPER
	RET

// func decryptVAES(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·decryptVAES(SB), NOSPLIT, $0-48
	ARGS
	VBROADCASTI32X4 xtspoly<>(SB), Z17
	XTSV(VAESDEC, VAESDECLAST, vdec32, vdec32a, vdec32b, vdec4, vdec4a, vdec4b, vdecdone)
	VZEROUPPER
	RET

// func encryptSectorsVAES(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·encryptSectorsVAES(SB), NOSPLIT, $0-48
	SECTORARGS
	VBROADCASTI32X4 xtspoly<>(SB), Z17
svencnext:
	MOVQ R10, DX
	XTSV(VAESENC, VAESENCLAST, svenc32, svenc32a, svenc32b, svenc4, svenc4a, svenc4b, svencdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  svencnext
	VZEROUPPER
	RET

// func decryptSectorsVAES(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)
TEXT ·decryptSectorsVAES(SB), NOSPLIT, $0-48
	SECTORARGS
	VBROADCASTI32X4 xtspoly<>(SB), Z17
svdecnext:
	MOVQ R10, DX
	XTSV(VAESDEC, VAESDECLAST, svdec32, svdec32a, svdec32b, svdec4, svdec4a, svdec4b, svdecdone)
	ADDQ $16, BX
	DECQ R9
	JNZ  svdecnext
	VZEROUPPER
	RET

// func encryptSectors512VAES(rk *byte, rounds int, buf *byte, sectors int, tweaks *byte)
TEXT ·encryptSectors512VAES(SB), NOSPLIT, $0-40
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), CX
	MOVQ buf+16(FP), DI
	MOVQ sectors+24(FP), R9
	MOVQ tweaks+32(FP), BX
	XTS512(VAESENC, VAESENCLAST, s5enc, s5enca, s5encb)

// func decryptSectors512VAES(rk *byte, rounds int, buf *byte, sectors int, tweaks *byte)
TEXT ·decryptSectors512VAES(SB), NOSPLIT, $0-40
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), CX
	MOVQ buf+16(FP), DI
	MOVQ sectors+24(FP), R9
	MOVQ tweaks+32(FP), BX
	XTS512(VAESDEC, VAESDECLAST, s5dec, s5deca, s5decb)

// func ecbEncryptAESNI(rk *byte, rounds int, dst, src *byte, n int)
//
// One block at a time: the blocks are independent, so the CPU overlaps the
// iterations by itself; this is for the few tweaks of a call.
TEXT ·ecbEncryptAESNI(SB), NOSPLIT, $0-40
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ src+24(FP), SI
	MOVQ n+32(FP), DX
ecbnext:
	MOVOU (SI), X0
	MOVOU (AX), X12
	PXOR  X12, X0
	LEAQ  16(AX), R8
	BODY1(AESENC, AESENCLAST, ecb128, ecb192)
	MOVOU X0, (DI)
	ADDQ  $16, SI
	ADDQ  $16, DI
	DECQ  DX
	JNZ   ecbnext
	RET
