package blockdev

import "testing"

func TestIsZero(t *testing.T) {
	for n := range 40 {
		p := make([]byte, n)
		if !IsZero(p) {
			t.Fatalf("IsZero of %d zero bytes is false", n)
		}
		for i := range p {
			p[i] = 1
			if IsZero(p) {
				t.Fatalf("IsZero of %d bytes with byte %d set is true", n, i)
			}
			p[i] = 0
		}
	}
}
