//go:build arm64 && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// hasNEON is true on every ARMv8-A core, which all have Advanced SIMD.
var hasNEON = cpu.ARM64.HasASIMD

// neonWidth is how many blocks chachaXORNEON XORs at a time.
const neonWidth = 4

// chachaXORNEON XORs groups*256 bytes of src into dst with the keystream
// of state s, four blocks at a time, counters in 32 bits. It does not
// update s.
//
//go:noescape
func chachaXORNEON(s *[16]uint32, dst, src *byte, groups int, rounds int)

// nhNEON sets h to NH of n bytes (a multiple of 16, 16 to 1024) at m.
//
//go:noescape
func nhNEON(k *nhKey, m *byte, n int, h *[4]uint64)

func nhKernel(im impl, k *nhKey, m *byte, n int, h *[4]uint64) {
	nhNEON(k, m, n, h)
}
