//go:build !(amd64 || arm64 || arm) || !gc || purego

package adiantum

import "github.com/luksd/luksd/internal/cpuimpl"

// impls lists the implementations this machine runs: the portable code only.
func impls() []impl { return []impl{cpuimpl.Generic} }

const chachaMaxWidth = 1

func chachaWidths(im impl) []int { return nil }

func chachaKernel(im impl, width int, s *[16]uint32, dst, src *byte, groups, rounds int) {
	panic("adiantum: no assembly")
}

func nhKernel(im impl, k *nhKey, m *byte, n int, h *[4]uint64) {
	panic("adiantum: no assembly")
}
