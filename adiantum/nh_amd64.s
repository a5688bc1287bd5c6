//go:build amd64 && gc && !purego

#include "textflag.h"

// NH with AVX2. The key's units are stored k0, k2, k1, k3 (see nhKey); the
// message units are shuffled the same way, so after the 32-bit adds each
// 64-bit lane holds a pair NH multiplies: (m0+k0, m2+k2) and (m1+k1, m3+k3).
// VPMULUDQ of a lane with itself shifted right by 32 forms both products.
// A ymm register carries two consecutive units; the key for pass p of units
// j, j+1 is the 32 bytes at unit j+p, so every pass is one unaligned load.

// NHPASS adds pass p of the units in m (already shuffled) into acc, using
// t, u as scratch. K points at the key of the first unit.
#define NHPASS(p, m, acc, t, u) \
	VPADDD   (16*p)(R8), m, t; \
	VPSRLQ   $32, t, u;        \
	VPMULUDQ u, t, t;          \
	VPADDQ   t, acc, acc

// func nhAVX2(k *nhKey, m *byte, n int, h *[4]uint64)
TEXT ·nhAVX2(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), R8
	MOVQ m+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ h+24(FP), DI

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

	CMPQ CX, $64
	JB   pair

quad:
	// Four units per iteration, as two independent pairs.
	VMOVDQU  0(SI), Y4
	VMOVDQU  32(SI), Y8
	VPSHUFD  $0xd8, Y4, Y4
	VPSHUFD  $0xd8, Y8, Y8
	NHPASS(0, Y4, Y0, Y5, Y6)
	NHPASS(1, Y4, Y1, Y7, Y9)
	NHPASS(2, Y4, Y2, Y5, Y6)
	NHPASS(3, Y4, Y3, Y7, Y9)
	ADDQ     $32, R8
	NHPASS(0, Y8, Y0, Y5, Y6)
	NHPASS(1, Y8, Y1, Y7, Y9)
	NHPASS(2, Y8, Y2, Y5, Y6)
	NHPASS(3, Y8, Y3, Y7, Y9)
	ADDQ     $32, R8
	ADDQ     $64, SI
	SUBQ     $64, CX
	CMPQ     CX, $64
	JAE      quad

pair:
	CMPQ CX, $32
	JB   single
	VMOVDQU 0(SI), Y4
	VPSHUFD $0xd8, Y4, Y4
	NHPASS(0, Y4, Y0, Y5, Y6)
	NHPASS(1, Y4, Y1, Y5, Y6)
	NHPASS(2, Y4, Y2, Y5, Y6)
	NHPASS(3, Y4, Y3, Y5, Y6)
	ADDQ    $32, R8
	ADDQ    $32, SI
	SUBQ    $32, CX

single:
	CMPQ CX, $16
	JB   done
	// One unit in the low lane; the 128-bit ops zero the high lanes of
	// the scratch registers, so the full-width adds keep the sums intact.
	VMOVDQU  0(SI), X4
	VPSHUFD  $0xd8, X4, X4
	VPADDD   0(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y0, Y0
	VPADDD   16(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y1, Y1
	VPADDD   32(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y2, Y2
	VPADDD   48(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y3, Y3

done:
	// Sum the four 64-bit lanes of each pass.
	VEXTRACTI128 $1, Y0, X4
	VPADDQ       X4, X0, X0
	VEXTRACTI128 $1, Y1, X4
	VPADDQ       X4, X1, X1
	VEXTRACTI128 $1, Y2, X4
	VPADDQ       X4, X2, X2
	VEXTRACTI128 $1, Y3, X4
	VPADDQ       X4, X3, X3
	VPUNPCKLQDQ  X1, X0, X4
	VPUNPCKHQDQ  X1, X0, X5
	VPADDQ       X5, X4, X4
	VMOVDQU      X4, 0(DI)
	VPUNPCKLQDQ  X3, X2, X4
	VPUNPCKHQDQ  X3, X2, X5
	VPADDQ       X5, X4, X4
	VMOVDQU      X4, 16(DI)
	VZEROUPPER
	RET

// NHPASSZ is NHPASS on four units in a zmm register.
#define NHPASSZ(p, m, acc, t, u) \
	VPADDD   (16*p)(R8), m, t; \
	VPSRLQ   $32, t, u;        \
	VPMULUDQ u, t, t;          \
	VPADDQ   t, acc, acc

// func nhAVX512(k *nhKey, m *byte, n int, h *[4]uint64)
//
// Eight units per iteration as two zmm groups of four, then the AVX2 code
// of nhAVX2 for the last 0-7 units.
TEXT ·nhAVX512(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), R8
	MOVQ m+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ h+24(FP), DI

	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3

	CMPQ CX, $128
	JB   fold

oct:
	VMOVDQU32 0(SI), Z4
	VMOVDQU32 64(SI), Z8
	VPSHUFD   $0xd8, Z4, Z4
	VPSHUFD   $0xd8, Z8, Z8
	NHPASSZ(0, Z4, Z0, Z5, Z6)
	NHPASSZ(1, Z4, Z1, Z7, Z9)
	NHPASSZ(2, Z4, Z2, Z10, Z11)
	NHPASSZ(3, Z4, Z3, Z12, Z13)
	ADDQ      $64, R8
	NHPASSZ(0, Z8, Z0, Z5, Z6)
	NHPASSZ(1, Z8, Z1, Z7, Z9)
	NHPASSZ(2, Z8, Z2, Z10, Z11)
	NHPASSZ(3, Z8, Z3, Z12, Z13)
	ADDQ      $64, R8
	ADDQ      $128, SI
	SUBQ      $128, CX
	CMPQ      CX, $128
	JAE       oct

fold:
	// Halve the accumulators to ymm; the VEX code below clears the upper
	// halves of Z0-Z3 anyway.
	VEXTRACTI64X4 $1, Z0, Y4
	VPADDQ        Y4, Y0, Y0
	VEXTRACTI64X4 $1, Z1, Y4
	VPADDQ        Y4, Y1, Y1
	VEXTRACTI64X4 $1, Z2, Y4
	VPADDQ        Y4, Y2, Y2
	VEXTRACTI64X4 $1, Z3, Y4
	VPADDQ        Y4, Y3, Y3
	CMPQ CX, $64
	JB   pair

quad:
	// Four units per iteration, as two independent pairs.
	VMOVDQU  0(SI), Y4
	VMOVDQU  32(SI), Y8
	VPSHUFD  $0xd8, Y4, Y4
	VPSHUFD  $0xd8, Y8, Y8
	NHPASS(0, Y4, Y0, Y5, Y6)
	NHPASS(1, Y4, Y1, Y7, Y9)
	NHPASS(2, Y4, Y2, Y5, Y6)
	NHPASS(3, Y4, Y3, Y7, Y9)
	ADDQ     $32, R8
	NHPASS(0, Y8, Y0, Y5, Y6)
	NHPASS(1, Y8, Y1, Y7, Y9)
	NHPASS(2, Y8, Y2, Y5, Y6)
	NHPASS(3, Y8, Y3, Y7, Y9)
	ADDQ     $32, R8
	ADDQ     $64, SI
	SUBQ     $64, CX
	CMPQ     CX, $64
	JAE      quad

pair:
	CMPQ CX, $32
	JB   single
	VMOVDQU 0(SI), Y4
	VPSHUFD $0xd8, Y4, Y4
	NHPASS(0, Y4, Y0, Y5, Y6)
	NHPASS(1, Y4, Y1, Y5, Y6)
	NHPASS(2, Y4, Y2, Y5, Y6)
	NHPASS(3, Y4, Y3, Y5, Y6)
	ADDQ    $32, R8
	ADDQ    $32, SI
	SUBQ    $32, CX

single:
	CMPQ CX, $16
	JB   done
	// One unit in the low lane; the 128-bit ops zero the high lanes of
	// the scratch registers, so the full-width adds keep the sums intact.
	VMOVDQU  0(SI), X4
	VPSHUFD  $0xd8, X4, X4
	VPADDD   0(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y0, Y0
	VPADDD   16(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y1, Y1
	VPADDD   32(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y2, Y2
	VPADDD   48(R8), X4, X5
	VPSRLQ   $32, X5, X6
	VPMULUDQ X6, X5, X5
	VPADDQ   Y5, Y3, Y3

done:
	// Sum the four 64-bit lanes of each pass.
	VEXTRACTI128 $1, Y0, X4
	VPADDQ       X4, X0, X0
	VEXTRACTI128 $1, Y1, X4
	VPADDQ       X4, X1, X1
	VEXTRACTI128 $1, Y2, X4
	VPADDQ       X4, X2, X2
	VEXTRACTI128 $1, Y3, X4
	VPADDQ       X4, X3, X3
	VPUNPCKLQDQ  X1, X0, X4
	VPUNPCKHQDQ  X1, X0, X5
	VPADDQ       X5, X4, X4
	VMOVDQU      X4, 0(DI)
	VPUNPCKLQDQ  X3, X2, X4
	VPUNPCKHQDQ  X3, X2, X5
	VPADDQ       X5, X4, X4
	VMOVDQU      X4, 16(DI)
	VZEROUPPER
	RET
