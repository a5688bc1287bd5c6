package adiantum

import (
	"fmt"
	"testing"
)

var benchSizes = []int{512, 4096}

// BenchmarkAdiantum measures Encrypt in place per implementation, with
// lukechampine.com/adiantum beside it as the "lukechampine" one
// (contrib/bench/adiantum.sh compares them).
func BenchmarkAdiantum(b *testing.B) {
	key := make([]byte, KeySize)
	for i := range key {
		key[i] = byte(i)
	}
	tweak := plain64(42)
	for _, im := range impls() {
		b.Run(im.String(), func(b *testing.B) {
			for _, rounds := range []int{12, 20} {
				c, err := newCipher(key, rounds, im)
				if err != nil {
					b.Fatal(err)
				}
				benchInPlace(b, rounds, func(buf []byte) { c.Encrypt(buf, buf, tweak) })
			}
		})
	}
	b.Run("lukechampine", func(b *testing.B) {
		for _, rounds := range []int{12, 20} {
			c := referenceCipher(key, rounds)
			benchInPlace(b, rounds, func(buf []byte) { c.Encrypt(buf, tweak) })
		}
	})
}

// benchInPlace runs encrypt on a buffer of each of benchSizes, as the
// sub-benchmark "rounds/size". Both implementations go through the same
// closure call, so their ratio is fair.
func benchInPlace(b *testing.B, rounds int, encrypt func(buf []byte)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("%d/%d", rounds, n), func(b *testing.B) {
			buf := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				encrypt(buf)
			}
		})
	}
}
