// Package adiantum implements Adiantum, the length-preserving tweakable
// encryption mode of Crowley and Biggers, exactly as Linux's crypto API
// defines adiantum(xchacha12,aes) and adiantum(xchacha20,aes). dm-crypt uses
// these for the cipher specs xchacha12,aes-adiantum-plain64 and
// xchacha20,aes-adiantum-plain64, with a 32-byte tweak: the plain64 IV,
// a little-endian 64-bit sector number followed by 24 zero bytes.
//
// Adiantum is an HBSH construction: the message M = L || R, with R its last
// 16 bytes, is encrypted as
//
//	P_M = R + H(T, L)                  (addition mod 2^128, little-endian)
//	C_M = AES-256(P_M)
//	C_L = L ^ XChaCha(C_M || 1 || 0...)
//	C_R = C_M - H(T, C_L)
//
// where H(T, L) = Poly1305(bitlen(L) || T) + Poly1305(NH(L)), both Poly1305
// evaluations without the final "s" addition. All keys derive from the 32-byte
// key by XChaCha with the nonce 1 || 0....
//
// The hot parts, the ChaCha permutation and NH, have SIMD paths chosen from
// the CPU's features when a Cipher is made: AVX2 and AVX-512 on amd64, NEON
// on arm64 and on 32-bit ARM (ARMv7 cores that have it). Every other
// platform, and the purego build tag, use the portable code. The assembly
// only XORs whole groups of ChaCha blocks and sums NH; the Go around it
// (chacha.go, nh.go) is shared by every architecture. The amd64 assembly,
// adiantum_amd64.s, is generated with avo by _asm/adiantum at the top of the
// repository (the _asm module, so luksd never depends on avo); the arm64 and
// ARMv7 assembly is written by hand, as avo only targets amd64. Key setup
// allocates; Encrypt and Decrypt do not.
package adiantum

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
)

const (
	// KeySize is the size of an Adiantum key in bytes.
	KeySize = 32
	// TweakSize is the size of the tweak in bytes, as Linux fixes it.
	TweakSize = 32
	// MinSize is the smallest message Adiantum encrypts.
	MinSize = 16
)

// Cipher is Adiantum keyed with one key. It holds only read-only state after
// New, so one Cipher is safe for concurrent use; Encrypt and Decrypt do not
// allocate.
type Cipher struct {
	rounds    int       // 12 or 20 ChaCha rounds
	streamKey [8]uint32 // XChaCha key, as ChaCha state words
	block     cipher.Block
	header    polyKey // Poly1305 key for the length and the tweak
	message   polyKey // Poly1305 key for the NH hashes
	nh        nhKey
	impl      impl // the ChaCha and NH kernels
}

// New returns Adiantum with XChaCha of the given rounds (12 or 20) keyed with
// a 32-byte key.
func New(key []byte, rounds int) (*Cipher, error) {
	return newCipher(key, rounds, defaultImpl)
}

func newCipher(key []byte, rounds int, im impl) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, errors.New("adiantum: key must be 32 bytes")
	}
	if rounds != 12 && rounds != 20 {
		return nil, errors.New("adiantum: rounds must be 12 or 20")
	}
	c := &Cipher{rounds: rounds, impl: im}
	for i := range c.streamKey {
		c.streamKey[i] = binary.LittleEndian.Uint32(key[4*i:])
	}

	// The subkeys are the XChaCha keystream under the nonce 1 || 0...:
	// the AES key, the two Poly1305 keys, then the NH key.
	var derived [32 + 16 + 16 + nhKeyBytes]byte
	var nonce [24]byte
	nonce[0] = 1
	c.xorKeyStream(derived[:], derived[:], &nonce)
	block, err := aes.NewCipher(derived[:32])
	if err != nil {
		clear(derived[:])
		return nil, err
	}
	c.block = block
	c.header.init(derived[32:48])
	c.message.init(derived[48:64])
	c.nh.init(derived[64:])
	clear(derived[:])
	return c, nil
}

// Rounds reports the number of XChaCha rounds, 12 or 20.
func (c *Cipher) Rounds() int { return c.rounds }

// Encrypt encrypts src into dst with the 32-byte tweak. len(src) must be at
// least 16 and len(dst) at least len(src); dst and src must either be the
// same slice or not overlap.
func (c *Cipher) Encrypt(dst, src, tweak []byte) {
	c.check(dst, src, tweak)
	c.encrypt(dst[:len(src)], src, tweak)
}

// Decrypt decrypts src into dst with the 32-byte tweak, under the same rules
// as Encrypt.
func (c *Cipher) Decrypt(dst, src, tweak []byte) {
	c.check(dst, src, tweak)
	c.decrypt(dst[:len(src)], src, tweak)
}

func (c *Cipher) check(dst, src, tweak []byte) {
	if c.rounds == 0 {
		panic("adiantum: use of a wiped Cipher")
	}
	if len(src) < MinSize {
		panic("adiantum: message shorter than 16 bytes")
	}
	if len(dst) < len(src) {
		panic("adiantum: output smaller than input")
	}
	if len(tweak) != TweakSize {
		panic("adiantum: tweak must be 32 bytes")
	}
}

// Wipe clears the key material the Cipher holds. The AES key schedule lives
// inside crypto/aes and is dropped for the garbage collector. A wiped Cipher
// must not be used again.
func (c *Cipher) Wipe() {
	clear(c.streamKey[:])
	c.header = polyKey{}
	c.message = polyKey{}
	clear(c.nh[:])
	c.block = nil
	c.rounds = 0
}
