//go:build (arm || arm64) && gc && !purego

package argon2

// impls lists the implementations this machine runs, slowest first.
func impls() []impl {
	if hasNEON {
		return []impl{implGeneric, implNEON}
	}
	return []impl{implGeneric}
}

func compressArch(im impl, out, x, y *block, xor bool) {
	blockNEON(out, x, y, xor)
}

// prefetch asks for b's cache lines ahead of use.
//
//go:noescape
func prefetch(b *block)
