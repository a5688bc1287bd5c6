//go:build arm && gc && !purego

#include "textflag.h"
#include "neon_arm.h"

// G with ARMv7 NEON, one permutation at a time: P's eight 16-byte
// registers a0, a1, b0, b1, c0, c1, d0, d1 (words 0-1, 2-3, ..., 14-15)
// are Q0-Q7. The rows pass takes each row of x ^ y (128 bytes, so its
// registers in order) through P into a 1 KiB frame; the columns pass takes
// each column from the frame (column j's register i is bytes 16j..16j+15 of
// row i, 128 bytes apart) through P, XORs x and y (and out) and stores it to
// out. Q8 and Q9 hold the diagonal step's b registers, D20-D23 (Q10, Q11)
// the low halves that BlaMka multiplies, Q12 and Q13 the rotation by 63's
// scratch, Q14 and Q15 loads.

// BLAMKA2 sets xi = xi + yi + 2*lo(xi)*lo(yi) for two register pairs, the
// product added twice by VMLAL.
#define BLAMKA2(x0, y0, x1, y1) \
	VMOVN64(20, x0);        \
	VMOVN64(21, y0);        \
	VMOVN64(22, x1);        \
	VMOVN64(23, y1);        \
	VADD64Q(x0, x0, y0);    \
	VADD64Q(x1, x1, y1);    \
	VMLAL32(x0, 20, 21);    \
	VMLAL32(x1, 22, 23);    \
	VMLAL32(x0, 20, 21);    \
	VMLAL32(x1, 22, 23)

// The XR macros set y = (y ^ x) >>> n for two register pairs: by 32 a word
// swap, by 8n a byte rotation of each D register, by 63 a shift left and a
// shift right and insert out of a scratch register.
#define XR32(x0, y0, x1, y1) \
	VEORQ(y0, y0, x0); \
	VEORQ(y1, y1, x1); \
	VREV64Q(y0, y0);   \
	VREV64Q(y1, y1)

#define XRBYTES(n, x0, y0, x1, y1) \
	VEORQ(y0, y0, x0);                  \
	VEORQ(y1, y1, x1);                  \
	VRORD(2*(y0), 2*(y0), n);           \
	VRORD(2*(y0)+1, 2*(y0)+1, n);       \
	VRORD(2*(y1), 2*(y1), n);           \
	VRORD(2*(y1)+1, 2*(y1)+1, n)

#define XR63(x0, y0, x1, y1) \
	VEORQ(12, y0, x0);     \
	VEORQ(13, y1, x1);     \
	VSHL64Q(y0, 12, 1);    \
	VSHL64Q(y1, 13, 1);    \
	VSRI64Q(y0, 12, 63);   \
	VSRI64Q(y1, 13, 63)

// GB2 is GB on two independent quads (ai, bi, ci, di).
#define GB2(a0, b0, c0, d0, a1, b1, c1, d1) \
	BLAMKA2(a0, b0, a1, b1);     \
	XR32(a0, d0, a1, d1);        \
	BLAMKA2(c0, d0, c1, d1);     \
	XRBYTES(3, c0, b0, c1, b1);  \
	BLAMKA2(a0, b0, a1, b1);     \
	XRBYTES(2, a0, d0, a1, d1);  \
	BLAMKA2(c0, d0, c1, d1);     \
	XR63(c0, b0, c1, b1)

// PERMUTE is P on Q0-Q7. VEXT.8 #8 sets a register to the high half of
// its first source, then the low half of its second. The diagonals are
// b'0 = (b0.hi, b1.lo) and b'1 = (b1.hi, b0.lo) in Q8 and Q9, d'0 =
// (d1.hi, d0.lo) and d'1 = (d0.hi, d1.lo) in Q2 and Q3, c swapped; then
// b and d go back.
#define PERMUTE \
	GB2(0, 2, 4, 6, 1, 3, 5, 7); \
	VEXTQ(8, 2, 3, 8);           \
	VEXTQ(9, 3, 2, 8);           \
	VEXTQ(2, 7, 6, 8);           \
	VEXTQ(3, 6, 7, 8);           \
	GB2(0, 8, 5, 2, 1, 9, 4, 3); \
	VEXTQ(6, 2, 3, 8);           \
	VEXTQ(7, 3, 2, 8);           \
	VEXTQ(2, 9, 8, 8);           \
	VEXTQ(3, 8, 9, 8)

// OUTROW XORs the next rows of x (at R0) and y (at R1), and of out (at R2)
// when R3, xor, is set, into Qq and stores it to out; R0-R2 step 128 bytes
// (R4) to the next row.
#define OUTROW(q) \
	VLD1X2R(28, 0, 4);  \
	VLD1X2R(30, 1, 4);  \
	VEORQ(q, q, 14);    \
	VEORQ(q, q, 15);    \
	CMP  $0, R3;        \
	BEQ  3(PC);         \
	VLD1X2(28, 2);      \
	VEORQ(q, q, 14);    \
	VST1X2R(2*(q), 2, 4)

// func blockNEON(out, x, y *block, xor bool)
TEXT ·blockNEON(SB), 0, $1040-13
	MOVW  out+0(FP), R0
	MOVW  x+4(FP), R1
	MOVW  y+8(FP), R2
	MOVBU xor+12(FP), R3

	// The rows into the frame at R6.
	ADD  $8, R13, R6
	MOVW R6, R9
	MOVW R1, R7
	MOVW R2, R8
	MOVW $8, R5

rows:
	VLD1X4P(0, 7)
	VLD1X4P(4, 7)
	VLD1X4P(8, 7)
	VLD1X4P(12, 7)
	VLD1X4P(28, 8)
	VEORQ(0, 0, 14)
	VEORQ(1, 1, 15)
	VLD1X4P(28, 8)
	VEORQ(2, 2, 14)
	VEORQ(3, 3, 15)
	VLD1X4P(28, 8)
	VEORQ(4, 4, 14)
	VEORQ(5, 5, 15)
	VLD1X4P(28, 8)
	VEORQ(6, 6, 14)
	VEORQ(7, 7, 15)
	PERMUTE
	VST1X4P(0, 9)
	VST1X4P(4, 9)
	VST1X4P(8, 9)
	VST1X4P(12, 9)
	SUB.S $1, R5
	BNE   rows

	// The columns: the frame, x, y and out columns at R6-R9 step 16
	// bytes along the rows; R0-R2 walk down a column.
	MOVW out+0(FP), R9
	MOVW x+4(FP), R7
	MOVW y+8(FP), R8
	MOVW $128, R4
	MOVW $8, R5

columns:
	MOVW R6, R0
	VLD1X2R(0, 0, 4)
	VLD1X2R(2, 0, 4)
	VLD1X2R(4, 0, 4)
	VLD1X2R(6, 0, 4)
	VLD1X2R(8, 0, 4)
	VLD1X2R(10, 0, 4)
	VLD1X2R(12, 0, 4)
	VLD1X2R(14, 0, 4)
	PERMUTE
	MOVW R7, R0
	MOVW R8, R1
	MOVW R9, R2
	OUTROW(0)
	OUTROW(1)
	OUTROW(2)
	OUTROW(3)
	OUTROW(4)
	OUTROW(5)
	OUTROW(6)
	OUTROW(7)
	ADD   $16, R6
	ADD   $16, R7
	ADD   $16, R8
	ADD   $16, R9
	SUB.S $1, R5
	BNE   columns
	RET

// func prefetch(b *block)
TEXT ·prefetch(SB), NOSPLIT, $0-4
	MOVW b+0(FP), R0
	PLD  0(R0)
	PLD  64(R0)
	PLD  128(R0)
	PLD  192(R0)
	PLD  256(R0)
	PLD  320(R0)
	PLD  384(R0)
	PLD  448(R0)
	PLD  512(R0)
	PLD  576(R0)
	PLD  640(R0)
	PLD  704(R0)
	PLD  768(R0)
	PLD  832(R0)
	PLD  896(R0)
	PLD  960(R0)
	RET
