// Command _asm generates adiantum's amd64 assembly, adiantum_amd64.s, with
// avo: ChaCha eight blocks at a time with AVX2, sixteen and eight at a time
// with AVX-512, and NH with AVX2 and AVX-512. It is its own module so that
// the luksd module never depends on avo.
//
//	cd _asm/adiantum && go run . -out ../../adiantum/adiantum_amd64.s
package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../../adiantum/adiantum_amd64.s

func main() {
	ConstraintExpr("amd64,gc,!purego")
	chachaAVX2()
	chachaAVX512("chachaXOR16AVX512", 16)
	chachaAVX512("chachaXOR8AVX512", 8)
	nh("nhAVX2", false)
	nh("nhAVX512", true)
	Generate()
}

// zmm lists the vector registers by number; AsY and AsX give the narrower
// views.
var zmm = [32]VecPhysical{
	Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31,
}

// The kernels' Go declarations are in arch_amd64.go; go vet checks that the
// generated code matches them. An nhKey is 268 words.
const (
	chachaSignature = "func(s *[16]uint32, dst, src *byte, groups int, rounds int)"
	nhSignature     = "func(k *[268]uint32, m *byte, n int, h *[4]uint64)"
)

// loadChaChaArgs loads the ChaCha kernels' arguments: the state to AX, dst
// to DI, src to SI, groups to CX and rounds to DX.
func loadChaChaArgs() {
	LoadArgs("s dst src groups rounds", RAX, RDI, RSI, RCX, RDX)
}

// quad is four ChaCha words, one register each: a quarter round's a, b, c
// and d, or a row of four registers to transpose.
type quad [4]Register

// quarterRounds runs four independent quarter rounds, (a[i], b[i], c[i],
// d[i]) for i < 4. xor(x, y) sets y ^= x and rotate(r, n) rotates each lane
// of the four registers r left by n.
func quarterRounds(a, b, c, d quad, xor func(x, y Register), rotate func(r quad, n int)) {
	for _, n := range [][2]int{{16, 12}, {8, 7}} {
		for i := range 4 {
			VPADDD(b[i], a[i], a[i])
		}
		for i := range 4 {
			xor(a[i], d[i])
		}
		rotate(d, n[0])
		for i := range 4 {
			VPADDD(d[i], c[i], c[i])
		}
		for i := range 4 {
			xor(c[i], b[i])
		}
		rotate(b, n[1])
	}
}

// doubleRound runs a column round then a diagonal round on the sixteen
// words w, each diagonal starting from the word named first.
func doubleRound(w [16]Register, diagonalFrom [4]int, xor func(x, y Register), rotate func(r quad, n int)) {
	var a, b, c, d quad
	for i := range 4 {
		a[i], b[i], c[i], d[i] = w[i], w[4+i], w[8+i], w[12+i]
	}
	quarterRounds(a, b, c, d, xor, rotate)
	for i, j := range diagonalFrom {
		a[i], b[i], c[i], d[i] = w[j], w[4+(j+1)%4], w[8+(j+2)%4], w[12+(j+3)%4]
	}
	quarterRounds(a, b, c, d, xor, rotate)
}

// transpose4 turns four registers holding words w..w+3 of several blocks
// (lane k of each is block k) into r0 = block 0, r1 = block 1, r2 = block 2,
// r3 = block 3 within each 128-bit lane, the four words in order. t are
// scratch.
func transpose4(r, t quad) {
	VPUNPCKLDQ(r[1], r[0], t[0])
	VPUNPCKHDQ(r[1], r[0], t[1])
	VPUNPCKLDQ(r[3], r[2], t[2])
	VPUNPCKHDQ(r[3], r[2], t[3])
	VPUNPCKLQDQ(t[2], t[0], r[0])
	VPUNPCKHQDQ(t[2], t[0], r[1])
	VPUNPCKLQDQ(t[3], t[1], r[2])
	VPUNPCKHQDQ(t[3], t[1], r[3])
}

// words returns the registers numbered from to from+15, in view as.
func words(from int, as func(VecPhysical) Register) [16]Register {
	var w [16]Register
	for i := range w {
		w[i] = as(zmm[from+i])
	}
	return w
}

func asY(v VecPhysical) Register { return v.AsY() }
func asZ(v VecPhysical) Register { return v }
