// Package gen holds the avo helpers the generators in _asm share.
package gen

import (
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// At is the memory operand disp(base).
func At(base Register, disp int) Mem { return Mem{Base: base, Disp: disp} }

// LoadArgs loads the parameters named in names, separated by spaces, into
// regs, in order.
func LoadArgs(names string, regs ...Register) {
	for i, name := range strings.Fields(names) {
		Load(Param(name), regs[i])
	}
}

// Words declares read-only data of 64-bit words under name.
func Words(name string, words ...uint64) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, w := range words {
		DATA(8*i, U64(w))
	}
	return m
}

// CPUID7 declares name, a func() uint32 that returns out (EBX, ECX or EDX)
// of CPUID leaf 7, subleaf 0: the feature bits that x/sys/cpu does not
// name.
func CPUID7(name string, out Register) {
	TEXT(name, NOSPLIT, "func() uint32")
	MOVL(U32(7), EAX)
	XORL(ECX, ECX)
	CPUID()
	Store(out, ReturnIndex(0))
	RET()
}
