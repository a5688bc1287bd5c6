package adiantum

// impl names one implementation of the hot parts, ChaCha and NH. Each
// Cipher is bound to one when it is made; tests make a Cipher for every
// impl the machine runs.
type impl int

const (
	implGeneric impl = iota // portable Go
	implAVX2                // amd64 AVX2
	implAVX512              // amd64 AVX-512 (F, VL, BW)
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
