package blockdev

import (
	"math/rand/v2"
	"testing"
)

// spanSet against a byte map, over random adds and removes.
func TestSpanSetModel(t *testing.T) {
	const size = 300
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var ss spanSet
		var model [size]bool
		for range 40 {
			a, b := int64(r.IntN(size)), int64(r.IntN(size))
			if a > b {
				a, b = b, a
			}
			add := r.IntN(3) != 0
			if add {
				ss.add(a, b)
			} else {
				ss.remove(a, b)
			}
			for i := a; i < b; i++ {
				model[i] = add
			}
			var n int64
			for i, in := range model {
				n += map[bool]int64{true: 1}[in]
				if got := ss.overlaps(int64(i), int64(i)+1); got != in {
					t.Fatalf("round %d: byte %d in set %v, want %v (%v)", round, i, got, in, ss.s)
				}
			}
			if ss.bytes() != n {
				t.Fatalf("round %d: %d bytes, want %d", round, ss.bytes(), n)
			}
			for i := 1; i < len(ss.s); i++ {
				if ss.s[i-1].end >= ss.s[i].start || ss.s[i].start >= ss.s[i].end {
					t.Fatalf("round %d: spans not sorted, disjoint and merged: %v", round, ss.s)
				}
			}
		}
	}
}
