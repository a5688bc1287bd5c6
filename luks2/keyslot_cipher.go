package luks2

import (
	"errors"
	"fmt"

	"github.com/luksd/luksd/dmcrypt"
)

// A LUKS2 keyslot's area may be encrypted with another cipher than the
// data segment's (cryptsetup's --keyslot-cipher and --keyslot-key-size,
// crypt_keyslot_set_encryption): the area's JSON says which, and unlock
// reads it from there.

// ErrKeyslotCipher: a keyslot cipher luksd cannot encrypt keyslot areas
// with.
var ErrKeyslotCipher = errors.New("cannot use the cipher for keyslot encryption")

// CheckKeyslotCipher reports whether cipher with a key of keySize bytes
// can encrypt keyslot areas: a dm-crypt spec luksd runs that is neither
// null nor ECB.
func CheckKeyslotCipher(cipher string, keySize int) error {
	if err := safeCipher(cipher); err != nil {
		return fmt.Errorf("%w: %v", ErrKeyslotCipher, err)
	}
	key := make([]byte, keySize)
	c, err := dmcrypt.New(cipher, key)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKeyslotCipher, err)
	}
	c.Wipe()
	return nil
}

// areaEncryption is a new keyslot area's cipher and key size: p's when it
// names one, else cipher and keySize.
func (p PBKDF) areaEncryption(cipher string, keySize int) (string, int, error) {
	if p.AreaCipher == "" {
		return cipher, keySize, nil
	}
	if err := CheckKeyslotCipher(p.AreaCipher, p.AreaKeySize); err != nil {
		return "", 0, err
	}
	return p.AreaCipher, p.AreaKeySize, nil
}
