// Package serpent implements the Serpent block cipher (Anderson, Biham and
// Knudsen, an AES finalist) in the byte order of the Linux kernel's
// "serpent" cipher, the one dm-crypt and cryptsetup use for serpent-xts and
// serpent-cbc volumes.
//
// The cipher follows the bitsliced formulation of the Serpent specification:
// the block is four 32-bit words, each round XORs a round key, applies one
// of eight 4-bit S-boxes to the 32 nibbles formed by the words' bit columns,
// and mixes the words with the linear transformation. The S-boxes are
// boolean circuits written out in the rounds (rounds_gen.go) that gen_test.go derives from the
// specification's tables (sbox.go) by a small search, so no code or
// formula is taken from another implementation.
//
// Byte order: the kernel reads the block and the key as little-endian words,
// word 0 first; a key shorter than 32 bytes is padded with a single 1 bit
// (the byte 0x01) and zeros. The NESSIE test vectors and the submission's
// reference printouts write the same numbers most significant byte first,
// so they match this package with key, plaintext and ciphertext byte
// reversed (the kernel's former "tnepres" cipher was exactly that).
//
// Cipher implements crypto/cipher.Block; its methods do not allocate and
// are safe for concurrent use. It is the portable Go code only: there is
// no assembly (the kernel's SSE2/AVX2 paths process 8 or 16 blocks at once;
// see README's speed figures).
package serpent

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// BlockSize is Serpent's block size in bytes.
const BlockSize = 16

// rounds is the number of rounds; there is one more round key.
const rounds = 32

// KeySizeError is returned for a key longer than 32 bytes.
type KeySizeError int

func (k KeySizeError) Error() string {
	return "serpent: invalid key size " + strconv.Itoa(int(k))
}

// Cipher is Serpent keyed with one key.
type Cipher struct {
	rk [rounds + 1][4]uint32 // round keys K0..K32
}

// NewCipher returns Serpent keyed with key, 0 to 32 bytes as the kernel
// takes them (dm-crypt volumes use 16, 24 or 32).
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) > 32 {
		return nil, KeySizeError(len(key))
	}
	c := new(Cipher)
	c.expandKey(key)
	return c, nil
}

// BlockSize returns 16.
func (c *Cipher) BlockSize() int { return BlockSize }

// Encrypt encrypts the first block of src into dst; they may overlap
// entirely or not at all.
func (c *Cipher) Encrypt(dst, src []byte) {
	if len(src) < BlockSize || len(dst) < BlockSize {
		panic("serpent: input or output not a full block")
	}
	x0, x1, x2, x3 := c.encrypt(load(src))
	store(dst, x0, x1, x2, x3)
}

// Decrypt decrypts the first block of src into dst.
func (c *Cipher) Decrypt(dst, src []byte) {
	if len(src) < BlockSize || len(dst) < BlockSize {
		panic("serpent: input or output not a full block")
	}
	x0, x1, x2, x3 := c.decrypt(load(src))
	store(dst, x0, x1, x2, x3)
}

// Wipe zeroes the round keys. The Cipher must not be used afterwards.
func (c *Cipher) Wipe() { clear(c.rk[:]) }

func load(b []byte) (x0, x1, x2, x3 uint32) {
	_ = b[15]
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]),
		binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
}

func store(b []byte, x0, x1, x2, x3 uint32) {
	_ = b[15]
	binary.LittleEndian.PutUint32(b, x0)
	binary.LittleEndian.PutUint32(b[4:], x1)
	binary.LittleEndian.PutUint32(b[8:], x2)
	binary.LittleEndian.PutUint32(b[12:], x3)
}

// linear is the specification's linear transformation LT.
func linear(x0, x1, x2, x3 uint32) (uint32, uint32, uint32, uint32) {
	x0 = bits.RotateLeft32(x0, 13)
	x2 = bits.RotateLeft32(x2, 3)
	x1 ^= x0 ^ x2
	x3 ^= x2 ^ x0<<3
	x1 = bits.RotateLeft32(x1, 1)
	x3 = bits.RotateLeft32(x3, 7)
	x0 ^= x1 ^ x3
	x2 ^= x3 ^ x1<<7
	x0 = bits.RotateLeft32(x0, 5)
	x2 = bits.RotateLeft32(x2, 22)
	return x0, x1, x2, x3
}

// linearInv undoes linear.
func linearInv(x0, x1, x2, x3 uint32) (uint32, uint32, uint32, uint32) {
	x2 = bits.RotateLeft32(x2, -22)
	x0 = bits.RotateLeft32(x0, -5)
	x2 ^= x3 ^ x1<<7
	x0 ^= x1 ^ x3
	x3 = bits.RotateLeft32(x3, -7)
	x1 = bits.RotateLeft32(x1, -1)
	x3 ^= x2 ^ x0<<3
	x1 ^= x0 ^ x2
	x2 = bits.RotateLeft32(x2, -3)
	x0 = bits.RotateLeft32(x0, -13)
	return x0, x1, x2, x3
}
