//go:build (arm || arm64) && gc && !purego

package argon2

import "github.com/luksd/luksd/internal/cpuimpl"

// impls lists the implementations this machine runs, slowest first.
func impls() []impl { return cpuimpl.Available(false, false, hasNEON) }

func compressArch(im impl, out, x, y *block, xor bool) {
	blockNEON(out, x, y, xor)
}

// prefetch asks for b's cache lines ahead of use.
//
//go:noescape
func prefetch(b *block)
