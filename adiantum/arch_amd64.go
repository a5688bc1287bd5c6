//go:build amd64 && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// impls lists the implementations this machine runs, slowest first.
func impls() []impl {
	l := []impl{implGeneric}
	if cpu.X86.HasAVX2 {
		l = append(l, implAVX2)
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW {
			l = append(l, implAVX512)
		}
	}
	return l
}

// chachaMaxWidth is the most blocks a ChaCha kernel here XORs at a time.
const chachaMaxWidth = 16

// chachaWidths lists the group sizes of im's ChaCha kernels, widest first.
func chachaWidths(im impl) []int {
	switch im {
	case implAVX512:
		return widthsAVX512
	case implAVX2:
		return widthsAVX2
	}
	return nil
}

var widthsAVX512, widthsAVX2 = []int{16, 8}, []int{8}

// The ChaCha kernels XOR groups groups of width blocks of src into dst with
// the keystream of state s, counters s[12]+0, +1, ... in 32 bits. They do
// not update s.

//go:noescape
func chachaXOR8AVX2(s *[16]uint32, dst, src *byte, groups int, rounds int)

//go:noescape
func chachaXOR16AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)

//go:noescape
func chachaXOR8AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)

func chachaKernel(im impl, width int, s *[16]uint32, dst, src *byte, groups, rounds int) {
	switch {
	case width == 16:
		chachaXOR16AVX512(s, dst, src, groups, rounds)
	case im == implAVX512:
		chachaXOR8AVX512(s, dst, src, groups, rounds)
	default:
		chachaXOR8AVX2(s, dst, src, groups, rounds)
	}
}

// The NH kernels set h to NH of n bytes (a multiple of 16, 16 to 1024) at m.

//go:noescape
func nhAVX2(k *nhKey, m *byte, n int, h *[4]uint64)

//go:noescape
func nhAVX512(k *nhKey, m *byte, n int, h *[4]uint64)

func nhKernel(im impl, k *nhKey, m *byte, n int, h *[4]uint64) {
	if im == implAVX512 {
		nhAVX512(k, m, n, h)
		return
	}
	nhAVX2(k, m, n, h)
}
