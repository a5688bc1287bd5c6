package argon2

import (
	"fmt"
	"testing"

	xargon2 "golang.org/x/crypto/argon2"
)

// BenchmarkBlock measures G alone on blocks that stay in the cache, per
// implementation.
func BenchmarkBlock(b *testing.B) {
	var x, y, out block
	for i := range x {
		x[i], y[i] = uint64(i)*0x9e3779b97f4a7c15, uint64(i)^0x5555
	}
	for _, im := range impls() {
		b.Run(im.String(), func(b *testing.B) {
			b.SetBytes(blockSize)
			for b.Loop() {
				compress(im, &out, &x, &y, true)
			}
		})
	}
}

// BenchmarkKey measures whole Argon2id derivations, each in fresh memory
// as an unlock runs, per implementation, with golang.org/x/crypto/argon2
// beside them as "xcrypto" (contrib/bench/argon2.sh compares them with
// libargon2 through cryptsetup).
func BenchmarkKey(b *testing.B) {
	for _, c := range []struct {
		memoryKiB, time uint32
		threads         uint8
	}{{64 << 10, 4, 4}, {1 << 20, 4, 2}} {
		name := fmt.Sprintf("m=%dMiB,t=%d,p=%d", c.memoryKiB>>10, c.time, c.threads)
		for _, im := range impls() {
			b.Run(im.String()+"/"+name, func(b *testing.B) {
				p := params{mode: Argon2id, time: c.time, memoryKiB: c.memoryKiB, threads: uint32(c.threads), keyLen: 32}
				b.SetBytes(int64(c.memoryKiB) << 10 * int64(c.time))
				for b.Loop() {
					if _, err := deriveWith(im, p, []byte("password"), make([]byte, 32), nil, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run("xcrypto/"+name, func(b *testing.B) {
			b.SetBytes(int64(c.memoryKiB) << 10 * int64(c.time))
			for b.Loop() {
				xargon2.IDKey([]byte("password"), make([]byte, 32), c.time, c.memoryKiB, c.threads, 32)
			}
		})
	}
}
