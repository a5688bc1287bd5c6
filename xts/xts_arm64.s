//go:build !purego

#include "textflag.h"

// The tweak lives in R6 (low qword) and R7 (high qword). MULX multiplies it
// by x: shift left by one across both words and fold bit 127 back as 0x87.
#define MULX \
	ASR $63, R7, R8       \
	AND $0x87, R8, R8     \
	LSR $63, R6, R9       \
	ORR R7<<1, R9, R7     \
	EOR R6<<1, R8, R6

// TWEAK puts the current tweak in V and advances it.
#define TWEAK(V) \
	VMOV R6, V.D[0] \
	VMOV R7, V.D[1] \
	MULX

// Round key k of r rounds is kept in V(30-r+k), so the last two are always
// V29 and V30 and fewer rounds just start further along.
#define ROUND8(OP, MIX, K) \
	OP  K.B16, V0.B16     \
	MIX V0.B16, V0.B16    \
	OP  K.B16, V1.B16     \
	MIX V1.B16, V1.B16    \
	OP  K.B16, V2.B16     \
	MIX V2.B16, V2.B16    \
	OP  K.B16, V3.B16     \
	MIX V3.B16, V3.B16    \
	OP  K.B16, V4.B16     \
	MIX V4.B16, V4.B16    \
	OP  K.B16, V5.B16     \
	MIX V5.B16, V5.B16    \
	OP  K.B16, V6.B16     \
	MIX V6.B16, V6.B16    \
	OP  K.B16, V7.B16     \
	MIX V7.B16, V7.B16

#define ROUND1(OP, MIX, K) \
	OP  K.B16, V0.B16 \
	MIX V0.B16, V0.B16

#define FINAL(OP, V, T) \
	OP   V29.B16, V.B16     \
	VEOR V30.B16, V.B16, V.B16 \
	VEOR T.B16, V.B16, V.B16

#define BODY8(OP, MIX, L128, L192) \
	CMP  $12, R1               \
	BLT  L128                  \
	BEQ  L192                  \
	ROUND8(OP, MIX, V16)       \
	ROUND8(OP, MIX, V17)       \
L192:                          \
	ROUND8(OP, MIX, V18)       \
	ROUND8(OP, MIX, V19)       \
L128:                          \
	ROUND8(OP, MIX, V20)       \
	ROUND8(OP, MIX, V21)       \
	ROUND8(OP, MIX, V22)       \
	ROUND8(OP, MIX, V23)       \
	ROUND8(OP, MIX, V24)       \
	ROUND8(OP, MIX, V25)       \
	ROUND8(OP, MIX, V26)       \
	ROUND8(OP, MIX, V27)       \
	ROUND8(OP, MIX, V28)       \
	FINAL(OP, V0, V8)          \
	FINAL(OP, V1, V9)          \
	FINAL(OP, V2, V10)         \
	FINAL(OP, V3, V11)         \
	FINAL(OP, V4, V12)         \
	FINAL(OP, V5, V13)         \
	FINAL(OP, V6, V14)         \
	FINAL(OP, V7, V15)

#define BODY1(OP, MIX, L128, L192) \
	CMP  $12, R1               \
	BLT  L128                  \
	BEQ  L192                  \
	ROUND1(OP, MIX, V16)       \
	ROUND1(OP, MIX, V17)       \
L192:                          \
	ROUND1(OP, MIX, V18)       \
	ROUND1(OP, MIX, V19)       \
L128:                          \
	ROUND1(OP, MIX, V20)       \
	ROUND1(OP, MIX, V21)       \
	ROUND1(OP, MIX, V22)       \
	ROUND1(OP, MIX, V23)       \
	ROUND1(OP, MIX, V24)       \
	ROUND1(OP, MIX, V25)       \
	ROUND1(OP, MIX, V26)       \
	ROUND1(OP, MIX, V27)       \
	ROUND1(OP, MIX, V28)       \
	FINAL(OP, V0, V8)

// XTS is the kernel for one direction: eight blocks in flight (V0-V7, their
// tweaks in V8-V15), then one at a time.
#define XTS(OP, MIX, K128, K192, KDONE, L8, L8a, L8b, L1, L1a, L1b, LDONE) \
	MOVD   rk+0(FP), R0                                          \
	MOVD   rounds+8(FP), R1                                      \
	MOVD   dst+16(FP), R2                                        \
	MOVD   src+24(FP), R3                                        \
	MOVD   n+32(FP), R4                                          \
	MOVD   tweak+40(FP), R5                                      \
	LDP    (R5), (R6, R7)                                        \
	CMP    $12, R1                                               \
	BLT    K128                                                  \
	BEQ    K192                                                  \
	VLD1.P 64(R0), [V16.B16, V17.B16, V18.B16, V19.B16]          \
	VLD1.P 64(R0), [V20.B16, V21.B16, V22.B16, V23.B16]          \
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]          \
	VLD1   (R0), [V28.B16, V29.B16, V30.B16]                     \
	B      KDONE                                                 \
K192:                                                            \
	VLD1.P 64(R0), [V18.B16, V19.B16, V20.B16, V21.B16]          \
	VLD1.P 64(R0), [V22.B16, V23.B16, V24.B16, V25.B16]          \
	VLD1.P 64(R0), [V26.B16, V27.B16, V28.B16, V29.B16]          \
	VLD1   (R0), [V30.B16]                                       \
	B      KDONE                                                 \
K128:                                                            \
	VLD1.P 64(R0), [V20.B16, V21.B16, V22.B16, V23.B16]          \
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]          \
	VLD1   (R0), [V28.B16, V29.B16, V30.B16]                     \
KDONE:                                                           \
L8:                                                              \
	CMP    $8, R4                                                \
	BLT    L1                                                    \
	VLD1.P 64(R3), [V0.B16, V1.B16, V2.B16, V3.B16]              \
	VLD1.P 64(R3), [V4.B16, V5.B16, V6.B16, V7.B16]              \
	TWEAK(V8)                                                    \
	TWEAK(V9)                                                    \
	TWEAK(V10)                                                   \
	TWEAK(V11)                                                   \
	TWEAK(V12)                                                   \
	TWEAK(V13)                                                   \
	TWEAK(V14)                                                   \
	TWEAK(V15)                                                   \
	VEOR   V8.B16, V0.B16, V0.B16                                \
	VEOR   V9.B16, V1.B16, V1.B16                                \
	VEOR   V10.B16, V2.B16, V2.B16                               \
	VEOR   V11.B16, V3.B16, V3.B16                               \
	VEOR   V12.B16, V4.B16, V4.B16                               \
	VEOR   V13.B16, V5.B16, V5.B16                               \
	VEOR   V14.B16, V6.B16, V6.B16                               \
	VEOR   V15.B16, V7.B16, V7.B16                               \
	BODY8(OP, MIX, L8a, L8b)                                     \
	VST1.P [V0.B16, V1.B16, V2.B16, V3.B16], 64(R2)              \
	VST1.P [V4.B16, V5.B16, V6.B16, V7.B16], 64(R2)              \
	SUB    $8, R4                                                \
	B      L8                                                    \
L1:                                                              \
	CBZ    R4, LDONE                                             \
	VLD1.P 16(R3), [V0.B16]                                      \
	TWEAK(V8)                                                    \
	VEOR   V8.B16, V0.B16, V0.B16                                \
	BODY1(OP, MIX, L1a, L1b)                                     \
	VST1.P [V0.B16], 16(R2)                                      \
	SUB    $1, R4                                                \
	B      L1                                                    \
LDONE:                                                           \
	STP    (R6, R7), (R5)                                        \
	RET

// func encryptARM64(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·encryptARM64(SB), NOSPLIT, $0-48
	XTS(AESE, AESMC, enck128, enck192, enckdone, enc8, enc8a, enc8b, enc1, enc1a, enc1b, encdone)

// func decryptARM64(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)
TEXT ·decryptARM64(SB), NOSPLIT, $0-48
	XTS(AESD, AESIMC, deck128, deck192, deckdone, dec8, dec8a, dec8b, dec1, dec1a, dec1b, decdone)
