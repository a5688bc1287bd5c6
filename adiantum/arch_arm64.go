//go:build arm64 && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// useNEON selects the Advanced SIMD paths (present on every ARMv8-A core).
// Tests switch it off to compare with the portable code.
var useNEON = cpu.ARM64.HasASIMD

// chachaXOR4NEON XORs groups*256 bytes of src into dst with the keystream
// of state s, four blocks at a time. It does not update s, and its counter
// is 32 bits: the caller keeps s[12] from wrapping.
//
//go:noescape
func chachaXOR4NEON(s *[16]uint32, dst, src *byte, groups int, rounds int)

// nhNEON sets h to NH of n bytes (a multiple of 16, at most 1024) at m.
//
//go:noescape
func nhNEON(k *nhKey, m *byte, n int, h *[4]uint64)

func chachaXOR(s *[16]uint32, dst, src []byte, rounds int) {
	if !useNEON || uint64(len(src))/chachaBlockBytes+uint64(s[12]) >= 1<<32-4 {
		chachaXORGeneric(s, dst, src, rounds)
		return
	}
	const group = 4 * chachaBlockBytes
	if n := len(src) / group; n > 0 {
		chachaXOR4NEON(s, &dst[0], &src[0], n, rounds)
		s[12] += uint32(4 * n)
		dst, src = dst[n*group:], src[n*group:]
	}
	if len(src) > 0 {
		var buf [group]byte
		copy(buf[:], src)
		chachaXOR4NEON(s, &buf[0], &buf[0], 1, rounds)
		copy(dst, buf[:len(src)])
		s[12] += uint32((len(src) + chachaBlockBytes - 1) / chachaBlockBytes)
		clear(buf[:])
	}
}

func nhSum(k *nhKey, m []byte, h *[4]uint64) {
	if !useNEON || len(m) == 0 {
		nhSumGeneric(k, m, h)
		return
	}
	nhNEON(k, &m[0], len(m), h)
}
