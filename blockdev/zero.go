package blockdev

import "encoding/binary"

// IsZero reports whether every byte of p is zero: a block a store need
// not keep, or a copy need not write to a fresh destination.
func IsZero(p []byte) bool {
	for len(p) >= 8 {
		if binary.NativeEndian.Uint64(p) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}
