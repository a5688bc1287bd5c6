package luks2

import (
	"bytes"
	"testing"
)

// A hotzone buffer is n writable bytes of zeros, a fresh one after the
// last was freed too, small (no huge page) or large.
func TestHotzoneBuffer(t *testing.T) {
	for _, n := range []int{4096, 3 << 20, 5<<20 + 4096} {
		for range 2 {
			b, free := hotzoneBuffer(n)
			if len(b) != n {
				t.Fatalf("%d bytes asked, %d given", n, len(b))
			}
			if !bytes.Equal(b, make([]byte, n)) {
				t.Fatalf("%d bytes: not zeros", n)
			}
			for i := range b {
				b[i] = 0xa5
			}
			free()
		}
	}
}
