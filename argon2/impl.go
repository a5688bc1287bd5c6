package argon2

// impl names one implementation of the block function G. Each derivation
// runs with one; tests run every impl the machine has.
type impl int

const (
	implGeneric impl = iota // portable Go
	implAVX2                // amd64 AVX2
	implAVX512              // amd64 AVX-512F
	implNEON                // arm64 Advanced SIMD, or ARMv7 NEON
)

var implNames = [...]string{
	implGeneric: "generic",
	implAVX2:    "avx2",
	implAVX512:  "avx512",
	implNEON:    "neon",
}

func (im impl) String() string { return implNames[im] }

// defaultImpl is the fastest impl this machine runs.
var defaultImpl = impls()[len(impls())-1]

// compress sets out to G(x, y), or XORs G(x, y) into out when xor is set
// (the passes after the first, in version 0x13). out may be y, not x.
func compress(im impl, out, x, y *block, xor bool) {
	if im == implGeneric {
		compressGeneric(out, x, y, xor)
		return
	}
	compressArch(im, out, x, y, xor)
}
