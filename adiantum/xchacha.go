package adiantum

import "encoding/binary"

// XChaCha as Linux implements it for Adiantum: HChaCha with the same number
// of rounds turns the key and the first 16 nonce bytes into a subkey; ChaCha
// (the original layout: 64-bit block counter in words 12-13, 64-bit nonce in
// words 14-15) then runs under the subkey with the last 8 nonce bytes and a
// counter from 0.

const (
	chachaBlockBytes = 64
	sigma0           = 0x61707865 // "expa"
	sigma1           = 0x3320646e // "nd 3"
	sigma2           = 0x79622d32 // "2-by"
	sigma3           = 0x6b206574 // "te k"
)

// xorKeyStream sets dst to src XOR the XChaCha keystream for nonce.
func (c *Cipher) xorKeyStream(dst, src []byte, nonce *[24]byte) {
	c.xorKeyStreamAt(dst, src, nonce, 0)
}

// xorKeyStreamAt is xorKeyStream starting at block counter.
func (c *Cipher) xorKeyStreamAt(dst, src []byte, nonce *[24]byte, counter uint64) {
	var s [16]uint32
	s[0], s[1], s[2], s[3] = sigma0, sigma1, sigma2, sigma3
	copy(s[4:12], c.streamKey[:])
	for i := 0; i < 4; i++ {
		s[12+i] = binary.LittleEndian.Uint32(nonce[4*i:])
	}
	hchacha(&s, c.rounds)
	// s[4:12] now holds the subkey; the rest of s becomes the ChaCha state.
	s[12], s[13] = uint32(counter), uint32(counter>>32)
	s[14] = binary.LittleEndian.Uint32(nonce[16:])
	s[15] = binary.LittleEndian.Uint32(nonce[20:])
	chachaXOR(c.impl, &s, dst, src, c.rounds)
	clear(s[:])
}
