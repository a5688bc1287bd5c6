package adiantum

// chachaXOR sets dst to src XOR the ChaCha keystream of state s, advancing
// s's block counter, with im's kernels. A kernel XORs whole groups of a
// fixed number of blocks and counts them in 32 bits; this driver feeds it
// the whole groups, runs a last partial group through a buffer (one more
// group of keystream costs less than the block-at-a-time portable code), and
// leaves a stream that would wrap the 32-bit counter to the portable code,
// which carries into s[13].
func chachaXOR(im impl, s *[16]uint32, dst, src []byte, rounds int) {
	widths := chachaWidths(im)
	if len(widths) == 0 || uint64(len(src))/chachaBlockBytes+uint64(s[12]) >= 1<<32-uint64(widths[0]) {
		chachaXORGeneric(s, dst, src, rounds)
		return
	}
	for i, w := range widths {
		group := w * chachaBlockBytes
		if n := len(src) / group; n > 0 {
			chachaKernel(im, w, s, &dst[0], &src[0], n, rounds)
			s[12] += uint32(w * n)
			dst, src = dst[n*group:], src[n*group:]
		}
		if len(src) == 0 {
			return
		}
		// What is left goes through the buffer as one group of this
		// width, unless a narrower kernel covers it in fewer blocks.
		if i+1 < len(widths) && len(src) <= widths[i+1]*chachaBlockBytes {
			continue
		}
		// Go zeroes a buffer when it is declared: one of eight blocks
		// serves all but the widest kernels.
		if w <= chachaTailWidth {
			var buf [chachaTailWidth * chachaBlockBytes]byte
			chachaTail(im, w, s, dst, src, buf[:group], rounds)
		} else {
			var buf [chachaMaxWidth * chachaBlockBytes]byte
			chachaTail(im, w, s, dst, src, buf[:group], rounds)
		}
		return
	}
}

// chachaTailWidth is the most blocks the smaller tail buffer holds.
const chachaTailWidth = min(8, chachaMaxWidth)

// chachaTail XORs the last, partial group of src into dst through buf, one
// group long, and advances s past the blocks it used.
func chachaTail(im impl, w int, s *[16]uint32, dst, src, buf []byte, rounds int) {
	copy(buf, src)
	chachaKernel(im, w, s, &buf[0], &buf[0], 1, rounds)
	copy(dst, buf[:len(src)])
	s[12] += uint32((len(src) + chachaBlockBytes - 1) / chachaBlockBytes)
	clear(buf)
}
