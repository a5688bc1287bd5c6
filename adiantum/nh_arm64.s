//go:build arm64 && gc && !purego

#include "textflag.h"

// NH with NEON. The key's units are stored k0, k2, k1, k3 (see nhKey) and
// each message unit is shuffled the same way by TBL, so pass p's sums are
// T_p = [t0, t2, t1, t3]. UZP1/UZP2 of two passes gather [t0, t1 | t0', t1']
// and [t2, t3 | t2', t3'], and UMLAL/UMLAL2 accumulate both products of
// both passes into 64-bit lanes.
//
// Go's assembler has no UMLAL, so it is encoded by hand:
// UMLAL Vd.2D, Vn.2S, Vm.2S is 0x2ea08000 | m<<16 | n<<5 | d, UMLAL2 sets
// bit 30.
#define UMLAL(m, n, d) WORD $(0x2ea08000 | (m)<<16 | (n)<<5 | (d))
#define UMLAL2(m, n, d) WORD $(0x6ea08000 | (m)<<16 | (n)<<5 | (d))

// func nhNEON(k *nhKey, m *byte, n int, h *[4]uint64)
TEXT ·nhNEON(SB), NOSPLIT, $0-32
	MOVD k+0(FP), R0
	MOVD m+8(FP), R1
	MOVD n+16(FP), R2
	MOVD h+24(FP), R3

	VEOR  V0.B16, V0.B16, V0.B16
	VEOR  V1.B16, V1.B16, V1.B16
	VEOR  V2.B16, V2.B16, V2.B16
	VEOR  V3.B16, V3.B16, V3.B16
	// Byte indexes taking words 0, 2, 1, 3.
	VMOVQ $0x0b0a090803020100, $0x0f0e0d0c07060504, V31

unit:
	VLD1.P 16(R1), [V4.B16]
	VTBL   V31.B16, [V4.B16], V4.B16
	VLD1   (R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD    $16, R0
	VADD   V16.S4, V4.S4, V16.S4
	VADD   V17.S4, V4.S4, V17.S4
	VADD   V18.S4, V4.S4, V18.S4
	VADD   V19.S4, V4.S4, V19.S4
	VUZP1  V17.S4, V16.S4, V20.S4
	VUZP2  V17.S4, V16.S4, V21.S4
	VUZP1  V19.S4, V18.S4, V22.S4
	VUZP2  V19.S4, V18.S4, V23.S4
	UMLAL(21, 20, 0)
	UMLAL2(21, 20, 1)
	UMLAL(23, 22, 2)
	UMLAL2(23, 22, 3)
	SUBS   $16, R2
	BNE    unit

	VADDP V1.D2, V0.D2, V4.D2
	VADDP V3.D2, V2.D2, V5.D2
	VST1  [V4.D2, V5.D2], (R3)
	RET
