package adiantum

import "encoding/binary"

// nhSumGeneric sets h to NH of m, a whole number of 16-byte units, at most
// 1024 bytes.
func nhSumGeneric(k *nhKey, m []byte, h *[4]uint64) {
	var h0, h1, h2, h3 uint64
	key := k[:]
	for len(m) >= nhUnitBytes {
		m0 := binary.LittleEndian.Uint32(m[0:])
		m1 := binary.LittleEndian.Uint32(m[4:])
		m2 := binary.LittleEndian.Uint32(m[8:])
		m3 := binary.LittleEndian.Uint32(m[12:])
		kk := key[:16]
		h0 += uint64(m0+kk[0])*uint64(m2+kk[1]) + uint64(m1+kk[2])*uint64(m3+kk[3])
		h1 += uint64(m0+kk[4])*uint64(m2+kk[5]) + uint64(m1+kk[6])*uint64(m3+kk[7])
		h2 += uint64(m0+kk[8])*uint64(m2+kk[9]) + uint64(m1+kk[10])*uint64(m3+kk[11])
		h3 += uint64(m0+kk[12])*uint64(m2+kk[13]) + uint64(m1+kk[14])*uint64(m3+kk[15])
		key = key[4:]
		m = m[nhUnitBytes:]
	}
	h[0], h[1], h[2], h[3] = h0, h1, h2, h3
}
