//go:build arm && gc && !purego

#include "textflag.h"
#include "neon_arm.h"

// ChaCha, two blocks at a time with ARMv7 NEON, one block per four Q
// registers holding its rows: Q0-Q3 block n, Q4-Q7 block n+1. The
// diagonal round rotates rows b, c, d by lanes with VEXT. Q8-Q9 are
// scratch, Q10-Q13 the input rows (Q13 with the counter of block n), Q14
// the counter step {1, 0, 0, 0}.

DATA one<>+0x00(SB)/4, $1
DATA one<>+0x04(SB)/4, $0
DATA one<>+0x08(SB)/4, $0
DATA one<>+0x0c(SB)/4, $0
GLOBL one<>(SB), RODATA|NOPTR, $16

// QR2 runs the quarter round on the rows of both blocks.
#define QR2 \
	VADDQ(0, 0, 1); VADDQ(4, 4, 5);     \
	VEORQ(3, 3, 0); VEORQ(7, 7, 4);     \
	VREV32Q(3, 3); VREV32Q(7, 7);       \
	VADDQ(2, 2, 3); VADDQ(6, 6, 7);     \
	VEORQ(8, 1, 2); VEORQ(9, 5, 6);     \
	VSHLQ(1, 8, 12); VSHLQ(5, 9, 12);   \
	VSRIQ(1, 8, 20); VSRIQ(5, 9, 20);   \
	VADDQ(0, 0, 1); VADDQ(4, 4, 5);     \
	VEORQ(8, 3, 0); VEORQ(9, 7, 4);     \
	VSHLQ(3, 8, 8); VSHLQ(7, 9, 8);     \
	VSRIQ(3, 8, 24); VSRIQ(7, 9, 24);   \
	VADDQ(2, 2, 3); VADDQ(6, 6, 7);     \
	VEORQ(8, 1, 2); VEORQ(9, 5, 6);     \
	VSHLQ(1, 8, 7); VSHLQ(5, 9, 7);     \
	VSRIQ(1, 8, 25); VSRIQ(5, 9, 25)

// func chachaXORNEON(s *[16]uint32, dst, src *byte, groups int, rounds int)
TEXT ·chachaXORNEON(SB), NOSPLIT, $0-20
	MOVW s+0(FP), R0
	MOVW dst+4(FP), R1
	MOVW src+8(FP), R2
	MOVW groups+12(FP), R3
	MOVW rounds+16(FP), R4

	VLD1X4P(20, 0)
	VLD1X4(24, 0)
	MOVW $one<>(SB), R5
	VLD1X2(28, 5)

pair:
	VMOVQ(0, 10)
	VMOVQ(1, 11)
	VMOVQ(2, 12)
	VMOVQ(3, 13)
	VMOVQ(4, 10)
	VMOVQ(5, 11)
	VMOVQ(6, 12)
	VADDQ(7, 13, 14)
	MOVW R4, R5

doubleround:
	QR2
	VEXTQ(1, 1, 1, 4); VEXTQ(5, 5, 5, 4)
	VEXTQ(2, 2, 2, 8); VEXTQ(6, 6, 6, 8)
	VEXTQ(3, 3, 3, 12); VEXTQ(7, 7, 7, 12)
	QR2
	VEXTQ(1, 1, 1, 12); VEXTQ(5, 5, 5, 12)
	VEXTQ(2, 2, 2, 8); VEXTQ(6, 6, 6, 8)
	VEXTQ(3, 3, 3, 4); VEXTQ(7, 7, 7, 4)
	SUB.S $2, R5
	BNE   doubleround

	VADDQ(0, 0, 10)
	VADDQ(1, 1, 11)
	VADDQ(2, 2, 12)
	VADDQ(3, 3, 13)
	VADDQ(4, 4, 10)
	VADDQ(5, 5, 11)
	VADDQ(6, 6, 12)
	VADDQ(7, 7, 13)
	VADDQ(7, 7, 14)

	VLD1X4P(16, 2)
	VEORQ(0, 0, 8)
	VEORQ(1, 1, 9)
	VST1X4P(0, 1)
	VLD1X4P(16, 2)
	VEORQ(2, 2, 8)
	VEORQ(3, 3, 9)
	VST1X4P(4, 1)
	VLD1X4P(16, 2)
	VEORQ(4, 4, 8)
	VEORQ(5, 5, 9)
	VST1X4P(8, 1)
	VLD1X4P(16, 2)
	VEORQ(6, 6, 8)
	VEORQ(7, 7, 9)
	VST1X4P(12, 1)

	VADDQ(13, 13, 14)
	VADDQ(13, 13, 14)
	SUB.S $1, R3
	BNE   pair

	// Leave no key stream in the vector registers.
	VEORQ(0, 0, 0)
	VEORQ(1, 1, 1)
	VEORQ(2, 2, 2)
	VEORQ(3, 3, 3)
	VEORQ(4, 4, 4)
	VEORQ(5, 5, 5)
	VEORQ(6, 6, 6)
	VEORQ(7, 7, 7)
	VEORQ(8, 8, 8)
	VEORQ(9, 9, 9)
	RET
