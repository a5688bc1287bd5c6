//go:build arm && gc && !purego

#include "textflag.h"
#include "neon_arm.h"

// NH with ARMv7 NEON. VTRN.32 on the halves of a message unit gives
// m0, m2, m1, m3, the order of the stored key (see nhKey); after the add,
// VTRN.32 on the halves of the sum gives [t0, t1] and [t2, t3], and
// VMLAL.U32 accumulates t0*t2 and t1*t3 into the two 64-bit lanes of the
// pass's accumulator (Q0-Q3). The lanes are summed by the caller.

// func nhNEONv7(k *nhKey, m *byte, n int, acc *[8]uint64)
TEXT ·nhNEONv7(SB), NOSPLIT, $0-16
	MOVW k+0(FP), R0
	MOVW m+4(FP), R1
	MOVW n+8(FP), R2
	MOVW acc+12(FP), R3

	VEORQ(0, 0, 0)
	VEORQ(1, 1, 1)
	VEORQ(2, 2, 2)
	VEORQ(3, 3, 3)

unit:
	VLD1X2P(8, 1)
	VTRND(8, 9)
	VLD1X4(16, 0)
	ADD    $32, R0, R4
	VLD1X4(20, 4)
	ADD    $16, R0
	VADDQ(8, 8, 4)
	VADDQ(9, 9, 4)
	VADDQ(10, 10, 4)
	VADDQ(11, 11, 4)
	VTRND(16, 17)
	VTRND(18, 19)
	VTRND(20, 21)
	VTRND(22, 23)
	VMLALQ(0, 16, 17)
	VMLALQ(1, 18, 19)
	VMLALQ(2, 20, 21)
	VMLALQ(3, 22, 23)
	SUB.S  $16, R2
	BNE    unit

	VST1X4P(0, 3)
	VST1X4P(4, 3)
	RET
