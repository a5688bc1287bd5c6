//go:build (arm || arm64) && gc && !purego

package adiantum

import "github.com/luksd/luksd/internal/cpuimpl"

// impls lists the implementations this machine runs, slowest first.
func impls() []impl { return cpuimpl.Available(false, false, hasNEON) }

// chachaMaxWidth is the most blocks a ChaCha kernel here XORs at a time.
const chachaMaxWidth = neonWidth

func chachaWidths(im impl) []int {
	if im == cpuimpl.NEON {
		return widthsNEON
	}
	return nil
}

var widthsNEON = []int{neonWidth}

func chachaKernel(im impl, width int, s *[16]uint32, dst, src *byte, groups, rounds int) {
	chachaXORNEON(s, dst, src, groups, rounds)
}
