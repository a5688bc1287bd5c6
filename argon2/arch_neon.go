//go:build (arm || arm64) && gc && !purego

package argon2

import "github.com/luksd/luksd/internal/cpuimpl"

// impls lists the implementations this machine runs, slowest first.
func impls() []impl {
	if hasNEON {
		return []impl{cpuimpl.Generic, cpuimpl.NEON}
	}
	return []impl{cpuimpl.Generic}
}

func compressArch(im impl, out, x, y *block, xor bool) {
	blockNEON(out, x, y, xor)
}

// prefetch asks for b's cache lines ahead of use.
//
//go:noescape
func prefetch(b *block)
