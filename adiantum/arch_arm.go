//go:build arm && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// hasNEON is true on most ARMv7-A application cores; some (Marvell's
// Armada 370) have no NEON.
var hasNEON = cpu.ARM.HasNEON

// neonWidth is how many blocks chachaXORNEON XORs at a time.
const neonWidth = 2

// chachaXORNEON XORs groups*128 bytes of src into dst with the keystream
// of state s, two blocks at a time, counters in 32 bits. It does not
// update s.
//
//go:noescape
func chachaXORNEON(s *[16]uint32, dst, src *byte, groups int, rounds int)

// nhNEONv7 accumulates NH of n bytes (a multiple of 16, 16 to 1024) at m
// into acc: pass p's sum is acc[2p] + acc[2p+1].
//
//go:noescape
func nhNEONv7(k *nhKey, m *byte, n int, acc *[8]uint64)

func nhKernel(im impl, k *nhKey, m *byte, n int, h *[4]uint64) {
	var acc [8]uint64
	nhNEONv7(k, m, n, &acc)
	for p := range h {
		h[p] = acc[2*p] + acc[2*p+1]
	}
}
