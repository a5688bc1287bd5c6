//go:build !(amd64 || arm64 || arm) || !gc || purego

package argon2

import "github.com/luksd/luksd/internal/cpuimpl"

// impls lists the implementations this machine runs: the portable code only.
func impls() []impl { return []impl{cpuimpl.Generic} }

func compressArch(im impl, out, x, y *block, xor bool) {
	panic("argon2: no assembly")
}

// prefetch is a no-op: portable Go cannot prefetch.
func prefetch(b *block) {}
