//go:build amd64 && gc && !purego

package adiantum

import "golang.org/x/sys/cpu"

// The SIMD paths, chosen once from the CPU's features. Tests switch them
// off in turn to compare each with the portable code.
var (
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW
)

// chachaXOR8AVX2 XORs groups*512 bytes of src into dst with the keystream
// of state s: eight blocks at a time, counters s[12]+0..7, s[12]+8..15, ...
// It does not update s, and its counter is 32 bits: the caller keeps s[12]
// from wrapping.
//
//go:noescape
func chachaXOR8AVX2(s *[16]uint32, dst, src *byte, groups int, rounds int)

// chachaXOR16AVX512 is chachaXOR8AVX2 for groups of sixteen blocks.
//
//go:noescape
func chachaXOR16AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)

// chachaXOR8AVX512 is chachaXOR8AVX2 with AVX-512VL.
//
//go:noescape
func chachaXOR8AVX512(s *[16]uint32, dst, src *byte, groups int, rounds int)

// nhAVX2 sets h to NH of n bytes (a multiple of 16, at most 1024) at m.
//
//go:noescape
func nhAVX2(k *nhKey, m *byte, n int, h *[4]uint64)

// nhAVX512 is nhAVX2 four units at a time.
//
//go:noescape
func nhAVX512(k *nhKey, m *byte, n int, h *[4]uint64)

func chachaXOR(s *[16]uint32, dst, src []byte, rounds int) {
	// The SIMD code counts blocks in 32 bits; a stream long enough to wrap
	// them (256 GiB) takes the portable path, which carries into s[13].
	if !useAVX2 || uint64(len(src))/chachaBlockBytes+uint64(s[12]) >= 1<<32-16 {
		chachaXORGeneric(s, dst, src, rounds)
		return
	}
	if useAVX512 {
		const group = 16 * chachaBlockBytes
		if n := len(src) / group; n > 0 {
			chachaXOR16AVX512(s, &dst[0], &src[0], n, rounds)
			s[12] += uint32(16 * n)
			dst, src = dst[n*group:], src[n*group:]
		}
		if len(src) > group/2 {
			// More than eight blocks left: one more group of sixteen,
			// through a buffer.
			var buf [group]byte
			copy(buf[:], src)
			chachaXOR16AVX512(s, &buf[0], &buf[0], 1, rounds)
			copy(dst, buf[:len(src)])
			s[12] += uint32((len(src) + chachaBlockBytes - 1) / chachaBlockBytes)
			clear(buf[:])
			return
		}
	}
	const group = 8 * chachaBlockBytes
	if n := len(src) / group; n > 0 {
		xor8(s, &dst[0], &src[0], n, rounds, useAVX512)
		s[12] += uint32(8 * n)
		dst, src = dst[n*group:], src[n*group:]
	}
	if len(src) > 0 {
		// A last partial group goes through a buffer: one more group of
		// keystream costs less than the block-at-a-time portable code.
		var buf [group]byte
		copy(buf[:], src)
		xor8(s, &buf[0], &buf[0], 1, rounds, useAVX512)
		copy(dst, buf[:len(src)])
		s[12] += uint32((len(src) + chachaBlockBytes - 1) / chachaBlockBytes)
		clear(buf[:])
	}
}

// xor8 runs the eight-block kernel of the CPU, called directly so that
// its arguments stay on the stack.
func xor8(s *[16]uint32, dst, src *byte, groups, rounds int, avx512 bool) {
	if avx512 {
		chachaXOR8AVX512(s, dst, src, groups, rounds)
	} else {
		chachaXOR8AVX2(s, dst, src, groups, rounds)
	}
}

func nhSum(k *nhKey, m []byte, h *[4]uint64) {
	if !useAVX2 || len(m) == 0 {
		nhSumGeneric(k, m, h)
		return
	}
	if useAVX512 {
		nhAVX512(k, &m[0], len(m), h)
		return
	}
	nhAVX2(k, &m[0], len(m), h)
}
