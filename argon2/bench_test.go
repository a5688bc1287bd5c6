package argon2

import (
	"fmt"
	"os"
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

// benchCosts are BenchmarkKey's Argon2id costs: LUKSD_ARGON2_BENCH as
// "time,memoryKiB,threads" (contrib/bench/argon2.sh sets it to the
// keyslot it compares with cryptsetup), else 4 passes over 64 MiB in 4
// lanes.
func benchCosts(b *testing.B) (time, memoryKiB uint32, threads uint8) {
	time, memoryKiB, threads = 4, 64<<10, 4
	if s := os.Getenv("LUKSD_ARGON2_BENCH"); s != "" {
		if _, err := fmt.Sscanf(s, "%d,%d,%d", &time, &memoryKiB, &threads); err != nil {
			b.Fatalf("LUKSD_ARGON2_BENCH=%q: want time,memoryKiB,threads", s)
		}
	}
	return time, memoryKiB, threads
}

// BenchmarkKey measures whole Argon2id derivations, each in fresh memory
// as an unlock runs, per implementation, with golang.org/x/crypto/argon2
// beside them as "xcrypto". Run with -benchtime 1x, a process runs one
// derivation, so its peak RSS is one derivation's.
func BenchmarkKey(b *testing.B) {
	time, memoryKiB, threads := benchCosts(b)
	password, salt := []byte("password"), make([]byte, 32)
	for _, im := range impls() {
		b.Run(im.String(), func(b *testing.B) {
			p := params{mode: Argon2id, time: time, memoryKiB: memoryKiB, threads: uint32(threads), keyLen: 32}
			b.SetBytes(int64(memoryKiB) << 10 * int64(time))
			for b.Loop() {
				if _, err := deriveWith(im, p, password, salt, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("xcrypto", func(b *testing.B) {
		b.SetBytes(int64(memoryKiB) << 10 * int64(time))
		for b.Loop() {
			xargon2.IDKey(password, salt, time, memoryKiB, threads, 32)
		}
	})
}
