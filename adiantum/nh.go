package adiantum

import (
	"encoding/binary"

	"github.com/luksd/luksd/internal/cpuimpl"
)

// NH as Adiantum uses it: four passes over a message of up to 1024 bytes in
// 16-byte units; pass p adds key words offset by 4p words to the message
// words and sums (m0+k0)*(m2+k2) + (m1+k1)*(m3+k3) per unit into a 64-bit
// value. The four values, little-endian, are the 32-byte hash.

const (
	nhUnitBytes  = 16
	nhChunkBytes = 1024
	nhPasses     = 4
	nhKeyBytes   = nhChunkBytes + (nhPasses-1)*nhUnitBytes // 1072
	nhKeyWords   = nhKeyBytes / 4
)

// nhKey holds the NH key with the words of every 16-byte unit stored in the
// order k0, k2, k1, k3. Keys are only ever used a whole unit at a time, so the
// permutation is invisible to the result; it lets SIMD code multiply adjacent
// 32-bit lanes, as NH pairs words 0 with 2 and 1 with 3.
type nhKey [nhKeyWords]uint32

func (k *nhKey) init(b []byte) {
	for i := 0; i < nhKeyWords; i += 4 {
		k[i+0] = binary.LittleEndian.Uint32(b[4*i:])
		k[i+1] = binary.LittleEndian.Uint32(b[4*i+8:])
		k[i+2] = binary.LittleEndian.Uint32(b[4*i+4:])
		k[i+3] = binary.LittleEndian.Uint32(b[4*i+12:])
	}
}

// nhSum sets h to NH of m, a whole number of 16-byte units, at most 1024
// bytes, with im's kernel.
func nhSum(im impl, k *nhKey, m []byte, h *[4]uint64) {
	if im == cpuimpl.Generic || len(m) == 0 {
		nhSumGeneric(k, m, h)
		return
	}
	nhKernel(im, k, &m[0], len(m), h)
}

// nhAddUnit adds the contribution of one 16-byte unit at index u of its
// chunk to h.
func nhAddUnit(k *nhKey, m []byte, u int, h *[4]uint64) {
	m0 := binary.LittleEndian.Uint32(m[0:])
	m1 := binary.LittleEndian.Uint32(m[4:])
	m2 := binary.LittleEndian.Uint32(m[8:])
	m3 := binary.LittleEndian.Uint32(m[12:])
	for p := 0; p < nhPasses; p++ {
		kk := k[4*(u+p):][:4]
		h[p] += uint64(m0+kk[0])*uint64(m2+kk[1]) + uint64(m1+kk[2])*uint64(m3+kk[3])
	}
}
