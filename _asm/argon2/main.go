// Command argon2 generates argon2's amd64 assembly, argon2_amd64.s, with
// avo: the compression function G over two 1 KiB blocks with AVX2 and with
// AVX-512. It is part of the _asm module so that the luksd module never
// depends on avo.
//
//	cd _asm/argon2 && go run . -out ../../argon2/argon2_amd64.s
package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../../argon2/argon2_amd64.s

func main() {
	ConstraintExpr("amd64,gc,!purego")
	blockAVX2()
	blockAVX512()
	prefetch()
	Generate()
}

// The kernels' Go declarations are in arch_amd64.go; go vet checks that the
// generated code matches them. A block is 128 words. A kernel sets out to
// G(x, y), or XORs G(x, y) into it when xor is set; out may be y, not x.
const blockSignature = "func(out, x, y *[128]uint64, xor bool)"

// loadBlockArgs loads a kernel's arguments: out to DI, x to SI, y to DX,
// xor to CX.
func loadBlockArgs() {
	LoadArgs("out x y", RDI, RSI, RDX)
	Load(Param("xor"), CL)
}

// quad is the four registers a, b, c, d of GB, each holding the same
// words of several independent permutations.
type quad [4]Register

// ops are the vector instructions a round needs: 64-bit XOR and rotation
// right by n.
type ops struct {
	xor    func(x, y, dst Register)
	rotate func(n int, x Register, scratch Register)
}

// gbAll is GB on every lane of the quads:
//
//	a = a + b + 2*lo(a)*lo(b); d = (d ^ a) >>> 32
//	c = c + d + 2*lo(c)*lo(d); b = (b ^ c) >>> 24
//	a = a + b + 2*lo(a)*lo(b); d = (d ^ a) >>> 16
//	c = c + d + 2*lo(c)*lo(d); b = (b ^ c) >>> 63
func gbAll(qs []quad, tmp []Register, o ops) {
	for _, step := range [4]struct{ x, y, z, rot int }{{0, 1, 3, 32}, {2, 3, 1, 24}, {0, 1, 3, 16}, {2, 3, 1, 63}} {
		for i, q := range qs {
			VPMULUDQ(q[step.y], q[step.x], tmp[i])
		}
		for _, q := range qs {
			VPADDQ(q[step.y], q[step.x], q[step.x])
		}
		for i, q := range qs {
			VPADDQ(tmp[i], tmp[i], tmp[i])
			VPADDQ(tmp[i], q[step.x], q[step.x])
		}
		for _, q := range qs {
			o.xor(q[step.x], q[step.z], q[step.z])
		}
		for i, q := range qs {
			o.rotate(step.rot, q[step.z], tmp[i])
		}
	}
}

// prefetch asks for the sixteen cache lines of a block ahead of use: the
// filler knows a reference block's place a block or more before it reads
// it.
func prefetch() {
	TEXT("prefetch", NOSPLIT, "func(b *[128]uint64)")
	Load(Param("b"), RAX)
	for off := 0; off < 1024; off += 64 {
		PREFETCHT0(At(RAX, off))
	}
	RET()
}
