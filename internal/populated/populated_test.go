package populated

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// A mapping is n writable bytes of zeros, small (no huge page) or large,
// and a fresh one after the last was unmapped too.
func TestMap(t *testing.T) {
	for _, n := range []int{4096, 3 << 20, 5<<20 + 4096} {
		for range 2 {
			b, err := Map(n)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != n {
				t.Fatalf("%d bytes asked, %d given", n, len(b))
			}
			if !bytes.Equal(b, make([]byte, n)) {
				t.Fatalf("%d bytes: not zeros", n)
			}
			for i := range b {
				b[i] = 0xa5
			}
			if err := unix.Munmap(b); err != nil {
				t.Fatal(err)
			}
		}
	}
}
