// Command sha256mb generates sha256mb's amd64 assembly, sha256mb_amd64.s,
// with avo: SHA-256 compression of several independent messages at once.
// blocks2 runs two with the SHA extensions (SHA256RNDS2 delivers its result
// late but starts another soon, and one message's rounds are one chain; two
// chains side by side keep the unit busy); blocks16 runs sixteen in the
// lanes of AVX-512 vectors. It is part of the _asm module so that the luksd
// module never depends on avo.
//
//	cd _asm/sha256mb && go run . -out ../../sha256mb/sha256mb_amd64.s
package main

import (
	"sync"

	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../../sha256mb/sha256mb_amd64.s

func main() {
	ConstraintExpr("amd64,gc,!purego")
	k := roundConstants()
	blocks2(k)
	blocks16(k)
	CPUID7("cpuid7ebx", EBX)
	Generate()
}

// lane is one message's registers: its state as the SHA extensions keep it
// (abef holds words A, B, E, F from the top lane down; cdgh C, D, G, H),
// the four message-schedule registers (w[i] holds the words of the round
// group i mod 4), a scratch register, the message pointer, and its state's
// offset in h, which is also where the frame keeps its state at the
// block's start.
type lane struct {
	abef, cdgh, tmp Register
	w               [4]Register
	p               Register
	h               int
}

// blocks2 is
//
//	func(h *[16]uint32, p, q *byte, n int)
//
// it runs SHA-256's compression over n 64-byte blocks of p with the state
// h[0:8] (words a to h) and over n blocks of q with h[8:16]. X0 is
// SHA256RNDS2's implicit operand: each group of four rounds moves a lane's
// message words plus constants into it in turn.
func blocks2(k Mem) {
	TEXT("blocks2", NOSPLIT, "func(h *[16]uint32, p, q *byte, n int)")
	frame := AllocLocal(64)
	LoadArgs("h p q n", RAX, RSI, RDI, RCX)
	flip := X15
	MOVOU(flipMask(), flip)
	lanes := []lane{
		{abef: X1, cdgh: X2, w: [4]Register{X3, X4, X5, X6}, tmp: X13, p: RSI, h: 0},
		{abef: X7, cdgh: X8, w: [4]Register{X9, X10, X11, X12}, tmp: X14, p: RDI, h: 32},
	}
	for _, l := range lanes {
		toSHAOrder(At(RAX, l.h), At(RAX, l.h+16), l)
	}
	Label("block2")
	for _, l := range lanes {
		MOVOU(l.abef, frame.Offset(l.h))
		MOVOU(l.cdgh, frame.Offset(l.h+16))
	}
	for g := range 16 {
		for _, l := range lanes {
			w := l.w[g%4]
			if g < 4 {
				MOVOU(At(l.p, 16*g), w)
				VPSHUFB(flip, w, w)
			} else {
				// W[g] = σ1-part(W[g-1]) + W[g-7 words] + σ0-part(W[g-3]) + W[g-4].
				SHA256MSG1(l.w[(g+1)%4], w)
				VPALIGNR(Imm(4), l.w[(g+2)%4], l.w[(g+3)%4], l.tmp)
				VPADDD(l.tmp, w, w)
				SHA256MSG2(l.w[(g+3)%4], w)
			}
			VPADDD(k.Offset(16*g), w, l.tmp)
		}
		for _, l := range lanes {
			MOVO(l.tmp, X0)
			SHA256RNDS2(X0, l.abef, l.cdgh)
		}
		for _, l := range lanes {
			PSHUFD(Imm(0x0e), l.tmp, X0)
			SHA256RNDS2(X0, l.cdgh, l.abef)
		}
	}
	for _, l := range lanes {
		VPADDD(frame.Offset(l.h), l.abef, l.abef)
		VPADDD(frame.Offset(l.h+16), l.cdgh, l.cdgh)
		ADDQ(Imm(64), l.p)
	}
	DECQ(RCX)
	JNZ(LabelRef("block2"))
	for _, l := range lanes {
		fromSHAOrder(At(RAX, l.h), At(RAX, l.h+16), l)
	}
	RET()
}

// toSHAOrder loads the state words a-d from abcd and e-h from efgh into
// l.abef and l.cdgh in the order SHA256RNDS2 takes.
func toSHAOrder(abcd, efgh Mem, l lane) {
	MOVOU(abcd, l.abef)
	MOVOU(efgh, l.cdgh)
	PSHUFD(Imm(0xb1), l.abef, l.tmp)  // lanes b a d c, lowest first
	PSHUFD(Imm(0x1b), l.cdgh, l.cdgh) // h g f e
	VPALIGNR(Imm(8), l.cdgh, l.tmp, l.abef)
	VPBLENDW(Imm(0xf0), l.tmp, l.cdgh, l.cdgh)
}

// fromSHAOrder stores l.abef and l.cdgh back as words a-d at abcd and e-h
// at efgh.
func fromSHAOrder(abcd, efgh Mem, l lane) {
	PSHUFD(Imm(0x1b), l.abef, l.abef) // lanes a b e f, lowest first
	PSHUFD(Imm(0xb1), l.cdgh, l.cdgh) // g h c d
	VPBLENDW(Imm(0xf0), l.cdgh, l.abef, l.tmp)
	VPALIGNR(Imm(8), l.abef, l.cdgh, l.cdgh)
	MOVOU(l.tmp, abcd)
	MOVOU(l.cdgh, efgh)
}

// roundConstants declares SHA-256's 64 round constants, K[i] at 4*i.
func roundConstants() Mem {
	k := [64]uint32{
		0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
		0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
		0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
		0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
		0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
		0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
		0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
		0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
	}
	words := make([]uint64, 32)
	for i := range words {
		words[i] = uint64(k[2*i]) | uint64(k[2*i+1])<<32
	}
	return Words("k256", words...)
}

// flipMask declares the VPSHUFB mask that turns each big-endian word of a
// 64-byte vector into a machine word, once for all the kernels.
var flipMask = sync.OnceValue(func() Mem {
	return Words("flip", 0x0405060700010203, 0x0c0d0e0f08090a0b, 0x0405060700010203, 0x0c0d0e0f08090a0b,
		0x0405060700010203, 0x0c0d0e0f08090a0b, 0x0405060700010203, 0x0c0d0e0f08090a0b)
})
