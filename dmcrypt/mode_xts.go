package dmcrypt

import (
	"encoding/binary"
	"fmt"

	"github.com/luksd/luksd/xts"
)

func init() {
	modes["xts"] = modeInfo{
		keySizes: func(c string) []int {
			var n []int
			for _, k := range blockCiphers[c].keySizes {
				n = append(n, 2*k)
			}
			return n
		},
		newCipher: newXTS,
	}
}

// xtsCipher is XTS (package xts: AES with its assembly, other block ciphers
// through its portable path) with the IV generator's output as the tweak. plain64, the common case, goes through the batch API; plain and
// plain64be are computed inline; other generators (essiv) are asked for each
// sector's IV.
type xtsCipher struct {
	c  *xts.Cipher
	iv ivGenerator
}

func newXTS(sp Spec, key []byte, iv ivGenerator) (SectorCipher, error) {
	var c *xts.Cipher
	var err error
	if sp.Cipher == "aes" {
		c, err = xts.NewCipher(key)
	} else {
		c, err = newXTSFromBlocks(sp.Cipher, key)
	}
	if err != nil {
		return nil, err
	}
	return &xtsCipher{c: c, iv: iv}, nil
}

// newXTSFromBlocks keys the block cipher named c with each half of key.
func newXTSFromBlocks(c string, key []byte) (*xts.Cipher, error) {
	bc, ok := blockCiphers[c]
	if !ok {
		return nil, fmt.Errorf("cipher %q is not supported in XTS mode", c)
	}
	data, err := bc.new(key[:len(key)/2])
	if err != nil {
		return nil, err
	}
	tweak, err := bc.new(key[len(key)/2:])
	if err != nil {
		return nil, err
	}
	return xts.NewCipherFromBlocks(data, tweak)
}

func (x *xtsCipher) Encrypt(buf []byte, sector uint64, sectorSize int) {
	x.crypt(buf, sector, sectorSize, true)
}

func (x *xtsCipher) Decrypt(buf []byte, sector uint64, sectorSize int) {
	x.crypt(buf, sector, sectorSize, false)
}

// crypt encrypts or decrypts buf's sectors in place. The direction is a
// flag, not a function value, so that the per-sector call stays direct.
func (x *xtsCipher) crypt(buf []byte, sector uint64, sectorSize int, encrypt bool) {
	step := uint64(sectorSize / 512)
	if _, ok := x.iv.(plain64IV); ok {
		if encrypt {
			x.c.EncryptSectors(buf, sectorSize, sector, step)
		} else {
			x.c.DecryptSectors(buf, sectorSize, sector, step)
		}
		return
	}
	for off := 0; off < len(buf); off += sectorSize {
		s := buf[off : off+sectorSize]
		t := x.tweak(s, sector)
		if encrypt {
			x.c.Encrypt(s, s, &t)
		} else {
			x.c.Decrypt(s, s, &t)
		}
		sector += step
	}
}

// tweak returns the IV of the sector held in s. A generator behind the
// interface writes it into s's first block, whose contents are kept aside
// meanwhile: a stack array handed to an interface method would be moved to
// the heap on every call.
func (x *xtsCipher) tweak(s []byte, sector uint64) [16]byte {
	var t [16]byte
	switch x.iv.(type) {
	case plainIV:
		binary.LittleEndian.PutUint32(t[:], uint32(sector))
	case plain64beIV:
		binary.BigEndian.PutUint64(t[8:], sector)
	default:
		saved := [16]byte(s)
		clear(s[:16])
		x.iv.generate(s[:16], sector)
		copy(t[:], s)
		copy(s, saved[:])
	}
	return t
}

func (x *xtsCipher) Wipe() {
	x.c.Wipe()
	if e, ok := x.iv.(essivIV); ok {
		wipeBlock(e.b)
	}
}
