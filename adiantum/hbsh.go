package adiantum

import (
	"encoding/binary"
	"math/bits"
)

// u128 is a 128-bit value as two little-endian 64-bit halves, the form in
// which Adiantum adds and subtracts its hashes.
type u128 struct{ lo, hi uint64 }

func load128(b []byte) u128 {
	return u128{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

func (x u128) put(b []byte) {
	binary.LittleEndian.PutUint64(b, x.lo)
	binary.LittleEndian.PutUint64(b[8:], x.hi)
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{lo, hi}
}

func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{lo, hi}
}

// headerHash is Poly1305 (without s) of the 16-byte block holding the bulk
// length in bits, followed by the tweak.
func (c *Cipher) headerHash(tweak []byte, bulkLen int) u128 {
	var p polyState
	p.block(&c.header, uint64(bulkLen)*8, 0)
	p.block(&c.header, binary.LittleEndian.Uint64(tweak[0:]), binary.LittleEndian.Uint64(tweak[8:]))
	p.block(&c.header, binary.LittleEndian.Uint64(tweak[16:]), binary.LittleEndian.Uint64(tweak[24:]))
	return p.sum()
}

// messageHash is NH-Poly1305 of msg: NH over each 1024-byte chunk (the last
// one zero-padded to a multiple of 16 bytes), each 32-byte NH value fed to
// Poly1305 (without s) as two blocks.
func (c *Cipher) messageHash(msg []byte) u128 {
	var p polyState
	var h [4]uint64
	for len(msg) > 0 {
		n := min(len(msg), nhChunkBytes)
		chunk := msg[:n]
		full := n &^ (nhUnitBytes - 1)
		nhSum(c.impl, &c.nh, chunk[:full], &h)
		if full < n {
			var pad [nhUnitBytes]byte
			copy(pad[:], chunk[full:])
			nhAddUnit(&c.nh, pad[:], full/nhUnitBytes, &h)
		}
		p.block(&c.message, h[0], h[1])
		p.block(&c.message, h[2], h[3])
		msg = msg[n:]
	}
	return p.sum()
}

// streamNonce is the XChaCha nonce HBSH derives from the AES-side block:
// C_M, then the 32-bit word 1, then zeros.
func streamNonce(cm u128) [24]byte {
	var n [24]byte
	cm.put(n[:16])
	n[16] = 1
	return n
}

func (c *Cipher) encrypt(dst, src, tweak []byte) {
	bulk := len(src) - 16
	hdr := c.headerHash(tweak, bulk)
	pm := load128(src[bulk:]).add(hdr).add(c.messageHash(src[:bulk]))

	// dst's last block holds P_M then C_M: crypto/aes is reached through an
	// interface, and handing it a local array would make that escape.
	r := dst[bulk:]
	pm.put(r)
	c.block.Encrypt(r, r)
	cm := load128(r)

	nonce := streamNonce(cm)
	c.xorKeyStream(dst[:bulk], src[:bulk], &nonce)
	cm.sub(hdr).sub(c.messageHash(dst[:bulk])).put(r)
}

func (c *Cipher) decrypt(dst, src, tweak []byte) {
	bulk := len(src) - 16
	hdr := c.headerHash(tweak, bulk)
	cm := load128(src[bulk:]).add(hdr).add(c.messageHash(src[:bulk]))

	r := dst[bulk:]
	cm.put(r)
	nonce := streamNonce(cm)
	c.xorKeyStream(dst[:bulk], src[:bulk], &nonce)

	c.block.Decrypt(r, r)
	pm := load128(r)
	pm.sub(hdr).sub(c.messageHash(dst[:bulk])).put(r)
}
