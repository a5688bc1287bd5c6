// Package cpuimpl names the instruction sets that a package's hand-written
// kernels are built for. adiantum and argon2 each bind one to a Cipher or a
// derivation, and their tests run every one the machine has; which CPU
// features a level needs is the using package's to say (its impls), since
// the kernels differ. xts names AES instruction sets of its own.
package cpuimpl

// Impl is one implementation: portable Go or a SIMD instruction set.
type Impl int

// The implementations, slowest first.
const (
	Generic Impl = iota // portable Go
	AVX2                // amd64 AVX2
	AVX512              // amd64 AVX-512 (F, and what else the package needs)
	NEON                // arm64 Advanced SIMD, or ARMv7 NEON
)

var names = [...]string{
	Generic: "generic",
	AVX2:    "avx2",
	AVX512:  "avx512",
	NEON:    "neon",
}

func (im Impl) String() string { return names[im] }

// Available lists Generic and then, slowest first, each level whose
// features the caller found: avx2 and avx512 on amd64 (AVX-512 only beside
// AVX2), neon on arm and arm64. The caller tests the features its own
// kernels need.
func Available(avx2, avx512, neon bool) []Impl {
	l := []Impl{Generic}
	if avx2 {
		l = append(l, AVX2)
		if avx512 {
			l = append(l, AVX512)
		}
	}
	if neon {
		l = append(l, NEON)
	}
	return l
}
