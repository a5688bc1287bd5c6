package dmcrypt

import (
	"fmt"

	"github.com/luksd/luksd/adiantum"
)

func init() {
	modes["adiantum"] = modeInfo{
		keySizes: func(c string) []int {
			if _, ok := adiantumRounds[c]; ok {
				return []int{adiantum.KeySize}
			}
			return nil
		},
		newCipher: newAdiantum,
	}
}

// adiantumRounds maps the cipher part of an Adiantum spec to its XChaCha
// rounds, as dm-crypt names them (xchacha12,aes-adiantum-plain64).
var adiantumRounds = map[string]int{
	"xchacha12,aes": 12,
	"xchacha20,aes": 20,
}

// adiantumCipher is Adiantum over each sector, the 32-byte tweak being the IV
// generator's output zero-extended, as dm-crypt passes its IV to the kernel's
// adiantum template.
type adiantumCipher struct {
	c  *adiantum.Cipher
	iv ivGenerator
}

func newAdiantum(sp Spec, key []byte, iv ivGenerator) (SectorCipher, error) {
	rounds, ok := adiantumRounds[sp.Cipher]
	if !ok {
		return nil, fmt.Errorf("cipher %q is not supported in Adiantum mode (xchacha12,aes or xchacha20,aes)", sp.Cipher)
	}
	switch iv.(type) {
	case plain64IV, plainIV, plain64beIV:
	default:
		return nil, fmt.Errorf("IV generator %q is not supported with Adiantum", sp.IV)
	}
	c, err := adiantum.New(key, rounds)
	if err != nil {
		return nil, err
	}
	return &adiantumCipher{c: c, iv: iv}, nil
}

// tweak returns the sector's tweak. The generators are matched by type so
// that the array stays on the stack (an interface call would move it to the
// heap).
func (a *adiantumCipher) tweak(sector uint64) [adiantum.TweakSize]byte {
	var t [adiantum.TweakSize]byte
	switch g := a.iv.(type) {
	case plain64IV:
		g.generate(t[:], sector)
	case plainIV:
		g.generate(t[:], sector)
	case plain64beIV:
		g.generate(t[:], sector)
	}
	return t
}

func (a *adiantumCipher) Encrypt(buf []byte, sector uint64, sectorSize int) {
	a.crypt(buf, sector, sectorSize, true)
}

func (a *adiantumCipher) Decrypt(buf []byte, sector uint64, sectorSize int) {
	a.crypt(buf, sector, sectorSize, false)
}

// crypt encrypts or decrypts buf's sectors in place; the direction is a
// flag so that the per-sector call stays direct.
func (a *adiantumCipher) crypt(buf []byte, sector uint64, sectorSize int, encrypt bool) {
	step := uint64(sectorSize / 512)
	for off := 0; off < len(buf); off += sectorSize {
		t := a.tweak(sector)
		s := buf[off : off+sectorSize]
		if encrypt {
			a.c.Encrypt(s, s, t[:])
		} else {
			a.c.Decrypt(s, s, t[:])
		}
		sector += step
	}
}

func (a *adiantumCipher) Wipe() { a.c.Wipe() }
