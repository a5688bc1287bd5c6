package dmcrypt

import (
	"crypto/aes"
	"crypto/cipher"

	"github.com/luksd/luksd/serpent"
	//lint:ignore SA1019 read where a header names it; see blockCiphers.
	"golang.org/x/crypto/twofish"
)

// blockCipher is a 16-byte block cipher dm-crypt runs in CBC and XTS mode
// and as the ESSIV cipher.
type blockCipher struct {
	keySizes []int // in bytes, one key (XTS takes two)
	new      func(key []byte) (cipher.Block, error)
}

// blockCiphers are the block ciphers by their name in a cipher spec.
// AES in XTS mode has its own package (xts) with assembly; the others run
// XTS through xts.NewCipherFromBlocks.
//
// Twofish is golang.org/x/crypto/twofish: the Twofish paper's vectors pass in
// its tests, the kernel's byte order is the paper's, and cryptsetup's
// twofish-xts test images decrypt through it (luks2's peer tests). It is
// table-driven Go, as the kernel's twofish-generic is C, and does not
// allocate. The package is deprecated (frozen: no fixes, no faster code);
// luksd never picks Twofish itself, it runs where a header or --cipher names
// it, and such volumes exist and must open. Serpent is luksd's own package
// (no Go library is served).
var blockCiphers = map[string]blockCipher{
	"aes":     {[]int{16, 24, 32}, aes.NewCipher},
	"serpent": {[]int{16, 24, 32}, func(k []byte) (cipher.Block, error) { return serpent.NewCipher(k) }},
	"twofish": {[]int{16, 24, 32}, newTwofish},
}

// twofishBlock lets Wipe clear x/crypto/twofish's key-dependent tables.
type twofishBlock struct{ *twofish.Cipher }

func newTwofish(key []byte) (cipher.Block, error) {
	c, err := twofish.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return twofishBlock{c}, nil
}

func (t twofishBlock) Wipe() { *t.Cipher = twofish.Cipher{} }

// wipeBlock clears b's key material where b can do that (crypto/aes keeps
// its expanded key out of reach).
func wipeBlock(b cipher.Block) {
	if w, ok := b.(interface{ Wipe() }); ok {
		w.Wipe()
	}
}
