package adiantum

import (
	"fmt"
	"testing"
)

var benchSizes = []int{512, 4096}

// BenchmarkAdiantum measures Encrypt in place per implementation path, with
// lukechampine.com/adiantum beside it as the "lukechampine" path
// (contrib/bench/adiantum.sh compares them).
func BenchmarkAdiantum(b *testing.B) {
	key := make([]byte, KeySize)
	for i := range key {
		key[i] = byte(i)
	}
	tweak := plain64(42)
	for _, p := range implPaths() {
		b.Run(p.name, func(b *testing.B) {
			defer p.use()()
			for _, rounds := range []int{12, 20} {
				c, err := New(key, rounds)
				if err != nil {
					b.Fatal(err)
				}
				for _, n := range benchSizes {
					b.Run(fmt.Sprintf("%d/%d", rounds, n), func(b *testing.B) {
						buf := make([]byte, n)
						b.SetBytes(int64(n))
						b.ReportAllocs()
						for b.Loop() {
							c.Encrypt(buf, buf, tweak)
						}
					})
				}
			}
		})
	}
	b.Run("lukechampine", func(b *testing.B) {
		for _, rounds := range []int{12, 20} {
			c := referenceCipher(key, rounds)
			for _, n := range benchSizes {
				b.Run(fmt.Sprintf("%d/%d", rounds, n), func(b *testing.B) {
					buf := make([]byte, n)
					b.SetBytes(int64(n))
					b.ReportAllocs()
					for b.Loop() {
						c.Encrypt(buf, tweak)
					}
				})
			}
		}
	})
}
