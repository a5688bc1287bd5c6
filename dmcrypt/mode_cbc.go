package dmcrypt

import (
	"crypto/cipher"
	"crypto/subtle"
	"fmt"
)

func init() {
	modes["cbc"] = modeInfo{
		keySizes:  func(c string) []int { return blockCiphers[c].keySizes },
		newCipher: newCBC,
	}
}

// cbcCipher is CBC over each sector with the IV from the generator. It
// chains blocks by hand so that no call allocates.
type cbcCipher struct {
	b  cipher.Block
	iv ivGenerator
}

func newCBC(sp Spec, key []byte, iv ivGenerator) (SectorCipher, error) {
	bc, ok := blockCiphers[sp.Cipher]
	if !ok {
		return nil, fmt.Errorf("cipher %q is not supported in CBC mode", sp.Cipher)
	}
	b, err := bc.new(key)
	if err != nil {
		return nil, err
	}
	return &cbcCipher{b: b, iv: iv}, nil
}

func (c *cbcCipher) Encrypt(buf []byte, sector uint64, sectorSize int) {
	c.sectors(buf, sector, sectorSize, func(s, iv []byte) {
		prev := iv
		for i := 0; i < len(s); i += 16 {
			blk := s[i : i+16]
			subtle.XORBytes(blk, blk, prev)
			c.b.Encrypt(blk, blk)
			prev = blk
		}
	})
}

func (c *cbcCipher) Decrypt(buf []byte, sector uint64, sectorSize int) {
	c.sectors(buf, sector, sectorSize, func(s, iv []byte) {
		// Decrypt back to front so each block's predecessor is still
		// ciphertext when it is needed, without a copy per block.
		for i := len(s) - 16; i >= 0; i -= 16 {
			blk := s[i : i+16]
			c.b.Decrypt(blk, blk)
			if i == 0 {
				subtle.XORBytes(blk, blk, iv)
			} else {
				subtle.XORBytes(blk, blk, s[i-16:i])
			}
		}
	})
}

// sectors calls fn on each sector of buf with its IV; sector numbers
// count 512-byte units from sector.
func (c *cbcCipher) sectors(buf []byte, sector uint64, sectorSize int, fn func(s, iv []byte)) {
	step := uint64(sectorSize / 512)
	sc := scratchPool.Get().(*ivScratch)
	defer scratchPool.Put(sc)
	for off := 0; off < len(buf); off += sectorSize {
		sc.iv = [32]byte{}
		c.iv.generate(sc.iv[:16], sector)
		fn(buf[off:off+sectorSize], sc.iv[:16])
		sector += step
	}
}

func (c *cbcCipher) Wipe() {
	wipeBlock(c.b)
	if e, ok := c.iv.(essivIV); ok {
		wipeBlock(e.b)
	}
}
