package dmcrypt

import (
	"crypto/aes"
	"fmt"

	"golang.org/x/crypto/xts"
)

func init() {
	modes["xts"] = modeInfo{
		keySizes: func(c string) []int {
			if c == "aes" {
				return []int{32, 48, 64}
			}
			return nil
		},
		newCipher: newXTS,
	}
}

// xtsCipher is AES-XTS with the tweak from the IV generator.
// TODO(ciphers issue): replace x/crypto/xts with package xts.
type xtsCipher struct {
	c  *xts.Cipher
	iv ivGenerator
}

func newXTS(sp Spec, key []byte, iv ivGenerator) (SectorCipher, error) {
	if sp.Cipher != "aes" {
		return nil, fmt.Errorf("cipher %q is not supported in XTS mode", sp.Cipher)
	}
	if _, ok := iv.(plain64IV); !ok {
		if _, ok := iv.(plainIV); !ok {
			return nil, fmt.Errorf("IV generator %q is not supported with XTS yet", sp.IV)
		}
	}
	c, err := xts.NewCipher(aes.NewCipher, key)
	if err != nil {
		return nil, err
	}
	return &xtsCipher{c: c, iv: iv}, nil
}

func (x *xtsCipher) tweak(sector uint64) uint64 {
	if _, ok := x.iv.(plainIV); ok {
		return sector & 0xffffffff
	}
	return sector
}

func (x *xtsCipher) Encrypt(buf []byte, sector uint64, sectorSize int) {
	for off := 0; off < len(buf); off += sectorSize {
		s := buf[off : off+sectorSize]
		x.c.Encrypt(s, s, x.tweak(sector))
		sector += uint64(sectorSize / 512)
	}
}

func (x *xtsCipher) Decrypt(buf []byte, sector uint64, sectorSize int) {
	for off := 0; off < len(buf); off += sectorSize {
		s := buf[off : off+sectorSize]
		x.c.Decrypt(s, s, x.tweak(sector))
		sector += uint64(sectorSize / 512)
	}
}

func (x *xtsCipher) Wipe() {}
