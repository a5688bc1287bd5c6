package argon2

import "github.com/luksd/luksd/internal/cpuimpl"

// impl names one implementation of the block function G; its AVX-512
// kernel needs F only. Each derivation runs with one; tests run every impl
// the machine has.
type impl = cpuimpl.Impl

// defaultImpl is the fastest impl this machine runs.
var defaultImpl = impls()[len(impls())-1]

// compress sets out to G(x, y), or XORs G(x, y) into out when xor is set
// (the passes after the first, in version 0x13). out may be y, not x.
func compress(im impl, out, x, y *block, xor bool) {
	if im == cpuimpl.Generic {
		compressGeneric(out, x, y, xor)
		return
	}
	compressArch(im, out, x, y, xor)
}
