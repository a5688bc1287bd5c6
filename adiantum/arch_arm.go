//go:build arm && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// useNEON selects the NEON paths when the CPU has NEON (most ARMv7-A
// application cores; not, for example, Marvell's Armada 370). Tests switch
// it off to compare with the portable code.
var useNEON = cpu.ARM.HasNEON

// chachaXOR2NEON XORs pairs*128 bytes of src into dst with the keystream
// of state s, two blocks at a time. It does not update s, and its counter
// is 32 bits: the caller keeps s[12] from wrapping.
//
//go:noescape
func chachaXOR2NEON(s *[16]uint32, dst, src *byte, pairs int, rounds int)

// nhNEONv7 accumulates NH of n bytes (a multiple of 16, at most 1024) at m
// into acc: pass p's sum is acc[2p] + acc[2p+1].
//
//go:noescape
func nhNEONv7(k *nhKey, m *byte, n int, acc *[8]uint64)

func chachaXOR(s *[16]uint32, dst, src []byte, rounds int) {
	if !useNEON || uint64(len(src))/chachaBlockBytes+uint64(s[12]) >= 1<<32-2 {
		chachaXORGeneric(s, dst, src, rounds)
		return
	}
	const group = 2 * chachaBlockBytes
	if n := len(src) / group; n > 0 {
		chachaXOR2NEON(s, &dst[0], &src[0], n, rounds)
		s[12] += uint32(2 * n)
		dst, src = dst[n*group:], src[n*group:]
	}
	if len(src) > 0 {
		var buf [group]byte
		copy(buf[:], src)
		chachaXOR2NEON(s, &buf[0], &buf[0], 1, rounds)
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
	var acc [8]uint64
	nhNEONv7(k, &m[0], len(m), &acc)
	for p := range h {
		h[p] = acc[2*p] + acc[2*p+1]
	}
}
