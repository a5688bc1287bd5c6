// Package xts implements AES-XTS (IEEE 1619) for whole data units, the way
// Linux's xts(aes) encrypts dm-crypt sectors.
//
// The key is the data key followed by the tweak key: 32, 48 or 64 bytes for
// AES-128, AES-192 or AES-256. A data unit is a whole number of 16-byte
// blocks; ciphertext stealing is not implemented because dm-crypt sectors
// never need it, and lengths that are not a positive multiple of 16 panic,
// as they do in golang.org/x/crypto/xts.
//
// The tweak is dm-crypt's 16-byte IV: for plain64, the 512-byte sector
// number little-endian and zero padded, which EncryptSectors and
// DecryptSectors generate themselves for a run of sectors.
//
// NewCipherFromBlocks makes the same mode over any other 16-byte block
// cipher, such as Serpent or Twofish for dm-crypt's serpent-xts and
// twofish-xts: the portable path below, with the caller's ciphers.
//
// On amd64 the work is done by AES-NI assembly with eight blocks in flight;
// by VAES on 256-bit vectors (16 blocks in flight) where the CPU has VAES,
// VPCLMULQDQ and AVX2; and by VAES on 512-bit vectors (32 blocks in flight)
// where it also has AVX-512. On arm64 it is done by the ARMv8 AES
// instructions; elsewhere, and with the purego build tag, by a portable path
// over crypto/aes. Each Cipher is bound to the fastest path the CPU runs when
// it is made.
//
// The amd64 assembly, xts_amd64.s, is generated with avo by _asm/xts at the
// top of the repository (the _asm module, so luksd never depends on avo);
// the arm64 assembly is written by hand, as avo only targets amd64.
package xts

import (
	"crypto/cipher"
	"errors"
)

const blockSize = 16

// maxRoundKeys is the size of an expanded AES-256 key: 15 round keys.
const maxRoundKeys = 15 * blockSize

// Cipher is AES-XTS keyed with a data key and a tweak key. Its methods do
// not allocate, and all but Wipe are safe for concurrent use.
type Cipher struct {
	enc    [maxRoundKeys]byte // data key, encryption round keys
	dec    [maxRoundKeys]byte // data key, equivalent inverse cipher round keys
	tweak  [maxRoundKeys]byte // tweak key, encryption round keys
	rounds int
	impl   impl
	gen    *generic // set only for implGeneric
}

// NewCipher returns AES-XTS keyed with key, the data key followed by the
// tweak key (32, 48 or 64 bytes in all).
func NewCipher(key []byte) (*Cipher, error) {
	return newCipher(key, defaultImpl)
}

// NewCipherFromBlocks returns XTS over the block ciphers data and tweak,
// keyed with the two halves of an XTS key. Both must have 16-byte blocks. The
// Cipher uses them through the portable path only; Wipe calls their Wipe
// method, where they have one.
func NewCipherFromBlocks(data, tweak cipher.Block) (*Cipher, error) {
	if data.BlockSize() != blockSize || tweak.BlockSize() != blockSize {
		return nil, errors.New("xts: block cipher does not have 16-byte blocks")
	}
	return &Cipher{impl: implGeneric, gen: &generic{data: data, tweak: tweak}}, nil
}

func newCipher(key []byte, im impl) (*Cipher, error) {
	switch len(key) {
	case 32, 48, 64:
	default:
		return nil, errors.New("xts: key must be 32, 48 or 64 bytes (data key || tweak key)")
	}
	half := len(key) / 2
	c := &Cipher{rounds: half/4 + 6, impl: im}
	expandKey(key[:half], c.enc[:], c.dec[:])
	expandKey(key[half:], c.tweak[:], nil)
	if im == implGeneric {
		g, err := newGeneric(key[:half], key[half:])
		if err != nil {
			return nil, err
		}
		c.gen = g
	}
	return c, nil
}

// Encrypt encrypts one data unit from src into dst with the 16-byte tweak
// (the dm-crypt IV). dst and src must be the same slice or not overlap, and
// len(src) must be a positive multiple of 16.
func (c *Cipher) Encrypt(dst, src []byte, tweak *[16]byte) {
	checkUnit(dst, src)
	c.unit(dst, src, tweak, false)
}

// Decrypt decrypts one data unit from src into dst with the 16-byte tweak.
// The same rules as for Encrypt apply.
func (c *Cipher) Decrypt(dst, src []byte, tweak *[16]byte) {
	checkUnit(dst, src)
	c.unit(dst, src, tweak, true)
}

// EncryptSectors encrypts buf in place as consecutive data units of
// sectorSize bytes with plain64 tweaks: the first unit's tweak is
// firstSector as a little-endian 64-bit number (zero padded to 16 bytes), the
// next one's firstSector+step, and so on. len(buf) must be a multiple of
// sectorSize, and sectorSize a positive multiple of 16.
func (c *Cipher) EncryptSectors(buf []byte, sectorSize int, firstSector, step uint64) {
	c.sectors(buf, sectorSize, firstSector, step, false)
}

// DecryptSectors is the inverse of EncryptSectors.
func (c *Cipher) DecryptSectors(buf []byte, sectorSize int, firstSector, step uint64) {
	c.sectors(buf, sectorSize, firstSector, step, true)
}

// Wipe zeroes the round keys. The Cipher must not be used afterwards. On
// the portable path, the crypto/aes ciphers it used are dropped but cannot be
// zeroed; block ciphers given to NewCipherFromBlocks are wiped if they have
// a Wipe method.
func (c *Cipher) Wipe() {
	clear(c.enc[:])
	clear(c.dec[:])
	clear(c.tweak[:])
	if c.gen != nil {
		for _, b := range []cipher.Block{c.gen.data, c.gen.tweak} {
			if w, ok := b.(interface{ Wipe() }); ok {
				w.Wipe()
			}
		}
	}
	c.gen = nil
}

func checkUnit(dst, src []byte) {
	if len(src) < blockSize || len(src)%blockSize != 0 {
		panic("xts: data unit is not a positive multiple of 16 bytes")
	}
	if len(dst) < len(src) {
		panic("xts: output smaller than input")
	}
	if len(dst) > 0 && len(src) > 0 && &dst[0] != &src[0] && overlaps(dst[:len(src)], src) {
		panic("xts: invalid buffer overlap")
	}
}
