package adiantum

import "github.com/luksd/luksd/internal/cpuimpl"

// impl names one implementation of the hot parts, ChaCha and NH; its
// AVX-512 kernels need F, VL and BW. Each Cipher is bound to one when it is
// made; tests make a Cipher for every impl the machine runs.
type impl = cpuimpl.Impl

// defaultImpl is the fastest impl this machine runs.
var defaultImpl = impls()[len(impls())-1]
