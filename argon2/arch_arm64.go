//go:build arm64 && gc && !purego

package argon2

import "golang.org/x/sys/cpu"

// hasNEON is true on every ARMv8-A core, which all have Advanced SIMD.
var hasNEON = cpu.ARM64.HasASIMD

// blockNEON sets out to G(x, y), or XORs G(x, y) into out when xor is set;
// out may be y. It is in block_arm64.s.
//
//go:noescape
func blockNEON(out, x, y *block, xor bool)
