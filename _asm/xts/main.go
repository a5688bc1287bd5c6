// Command _asm generates xts's amd64 assembly, xts_amd64.s, with avo: the
// AES-NI kernels (eight blocks in flight), the VAES kernels on 512-bit
// vectors (32 blocks in flight, and one for whole 512-byte sectors), the
// VAES kernels on 256-bit vectors (16 blocks in flight), and ECB for the
// sector tweaks. It is its own module so that the luksd module never
// depends on avo.
//
//	cd _asm/xts && go run . -out ../../xts/xts_amd64.s
package main

import (
	. "github.com/luksd/luksd/_asm/gen"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../../xts/xts_amd64.s

func main() {
	ConstraintExpr("!purego")
	declareData()
	for _, d := range []direction{encrypt, decrypt} {
		kernels(d, "AESNI", 256, func() { MOVOU(mulxMask, X14) }, func(frame Mem) { aesniBody(d, frame) }, false)
		kernels(d, "VAES", 0, func() { VBROADCASTI32X4(poly, Z17) }, func(Mem) { vaes512Body(d) }, true)
		vaes512Sectors512(d)
		kernels(d, "VAES256", 512, func() {}, func(frame Mem) { vaes256Body(d, frame) }, true)
	}
	ecbEncrypt()
	CPUID7("cpuid7ecx", ECX)
	Generate()
}

// The kernels' Go declarations are in xts_amd64.go; go vet checks that the
// generated code matches them. A unit kernel takes the round keys, the
// number of rounds (10, 12 or 14), n blocks at dst and src, and the
// encrypted tweak of the first block, which it replaces with the tweak of
// the block after the last. A sector kernel runs in place over sectors data
// units of blocks blocks each, with their encrypted tweaks one after the
// other (overwritten).
const (
	unitSignature      = "func(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)"
	sectorsSignature   = "func(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)"
	sectors512Signaure = "func(rk *byte, rounds int, buf *byte, sectors int, tweaks *byte)"
)

// direction is encryption or decryption: its name and its round
// instructions, legacy SSE and VEX/EVEX.
type direction struct {
	name          string
	round, last   func(k, x Op)
	vround, vlast func(k, x, y Op)
}

var (
	encrypt = direction{"encrypt", AESENC, AESENCLAST, VAESENC, VAESENCLAST}
	decrypt = direction{"decrypt", AESDEC, AESDECLAST, VAESDEC, VAESDECLAST}
)

// The read-only data, declared once.
var (
	// mulxMask multiplies a tweak by x in one 128-bit lane (see mulX).
	mulxMask Mem
	// poly is the polynomial's low byte, for VPCLMULQDQ, in a 128-bit lane.
	poly Mem
	// shiftLeft and shiftRight are per-qword shift counts that turn four
	// copies of a tweak T into T, Tx, Tx^2, Tx^3 (a count of 64 shifts
	// everything out; see tweaks32).
	shiftLeft, shiftRight Mem
)

func declareData() {
	mulxMask = Words("xtsmask", 0x87, 1)
	poly = Words("xtspoly", 0x87, 0)
	shiftLeft = Words("xtsshl", 0, 0, 1, 1, 2, 2, 3, 3)
	shiftRight = Words("xtsshr", 64, 64, 63, 63, 62, 62, 61, 61)
}

// loadUnitArgs loads a unit kernel's arguments: the round keys to AX, the
// rounds to CX, dst to DI, src to SI, the blocks to DX, the tweak's address
// to BX.
func loadUnitArgs() {
	LoadArgs("rk rounds dst src n tweak", RAX, RCX, RDI, RSI, RDX, RBX)
}

// loadSectorArgs loads a sector kernel's arguments: R9 sectors of R10
// blocks each, in place at DI = SI, their tweaks one after the other at BX.
func loadSectorArgs() {
	LoadArgs("rk rounds buf", RAX, RCX, RDI)
	MOVQ(RDI, RSI)
	LoadArgs("blocks sectors tweaks", R10, R9, RBX)
}

// kernels emits the unit and the sector kernel of direction d for the
// implementation impl around body, which runs over one data unit with the
// registers loadUnitArgs sets and a stack frame of frameSize bytes. setup
// runs once after the arguments are loaded; vzeroupper ends kernels that
// touch the upper halves of the vector registers.
func kernels(d direction, impl string, frameSize int, setup func(), body func(frame Mem), vzeroupper bool) {
	for _, sectors := range []bool{false, true} {
		if sectors {
			TEXT(d.name+"Sectors"+impl, NOSPLIT, sectorsSignature)
		} else {
			TEXT(d.name+impl, NOSPLIT, unitSignature)
		}
		var frame Mem
		if frameSize > 0 {
			frame = AllocLocal(frameSize)
		}
		if sectors {
			loadSectorArgs()
			setup()
			eachSector(func() { body(frame) })
		} else {
			loadUnitArgs()
			setup()
			body(frame)
		}
		if vzeroupper {
			VZEROUPPER()
		}
		RET()
	}
}

// eachSector runs the unit kernel body over each of R9 sectors of R10
// blocks, the tweak pointer BX stepping to the next sector's tweak.
func eachSector(body func()) {
	Label("next")
	MOVQ(R10, RDX)
	body()
	ADDQ(Imm(16), RBX)
	DECQ(R9)
	JNZ(LabelRef("next"))
}

// nextBlocks moves SI and DI on by n blocks and counts them off DX.
func nextBlocks(n int) {
	step := Op(Imm(uint64(16 * n)))
	if 16*n > 127 {
		step = U32(uint32(16 * n))
	}
	ADDQ(step, RSI)
	ADDQ(step, RDI)
	if n == 1 {
		DECQ(RDX)
	} else {
		SUBQ(Imm(uint64(n)), RDX)
	}
}

// whileAtLeast starts a loop, at label, that runs while at least n blocks
// are left in DX, then goes to exit.
func whileAtLeast(label string, n int, exit string) {
	Label(label)
	CMPQ(RDX, Imm(uint64(n)))
	JB(LabelRef(exit))
}

// whileBlocks starts a loop, at label, that runs until no block is left
// in DX, then goes to done.
func whileBlocks(label string) {
	Label(label)
	TESTQ(RDX, RDX)
	JZ(LabelRef("done"))
}

// aesRounds runs the AES rounds after whitening, R8 pointing at round key 1
// and CX holding the number of rounds: round(off) is one round with the key
// at off(R8). AES-192 and AES-256 run their extra rounds first, so the last
// ten always start at 0(R8). between(k), k < 8, runs after the (k+1)th of
// those ten, where the AES units are busy and other ports idle; last ends
// the rounds (the last round, or loading its key).
func aesRounds(label string, round func(off int), between func(k int), last func()) {
	CMPQ(RCX, Imm(12))
	JB(LabelRef(label + "128"))
	JEQ(LabelRef(label + "192"))
	for _, l := range []string{"192", "128"} {
		round(0)
		round(16)
		ADDQ(Imm(32), R8)
		Label(label + l)
	}
	for k := range 9 {
		round(16 * k)
		if between != nil && k < 8 {
			between(k)
		}
	}
	last()
}
