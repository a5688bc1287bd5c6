//go:build arm && gc && !purego

package argon2

import "golang.org/x/sys/cpu"

// hasNEON is true on most ARMv7-A application cores; some (Marvell's
// Armada 370) have no NEON.
var hasNEON = cpu.ARM.HasNEON

// blockNEON sets out to G(x, y), or XORs G(x, y) into out when xor is set;
// out may be y. It is in block_arm.s.
//
//go:noescape
func blockNEON(out, x, y *block, xor bool)
