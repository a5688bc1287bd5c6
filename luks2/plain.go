package luks2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Plain dm-crypt has no header: its volume key is made from the
// passphrase each time the volume opens, as cryptsetup's crypt_plain_hash
// makes it. It lives here beside the other hashes cryptsetup names.

// ErrPlainHash is a plain-mode hash spec that cannot make the key
// (cryptsetup: "Key processing error").
var ErrPlainHash = errors.New("key processing error")

// PlainKey fills key with the volume key plain mode derives from
// passphrase with hashSpec, cryptsetup's --hash: "NAME" or "NAME:BYTES".
// Round i (from 0) hashes i letters 'A' and then the passphrase, and
// supplies the next hash-sized piece of the key, so a hash shorter than
// the key still fills it. With ":BYTES" only the first BYTES of the key
// come from the hash and the rest are zero. NAME "plain" copies the
// passphrase instead, which must then be long enough.
func PlainKey(hashSpec string, key, passphrase []byte) error {
	name, hashed := hashSpec, len(key)
	if n, length, ok := strings.Cut(hashSpec, ":"); ok {
		v, err := strconv.ParseUint(length, 10, 31)
		if err != nil || int(v) > len(key) {
			return fmt.Errorf("%w (using hash %s)", ErrPlainHash, hashSpec)
		}
		name, hashed = n, int(v)
	}
	clear(key)
	if name == "plain" {
		if len(passphrase) < hashed {
			return fmt.Errorf("%w (using hash %s): passphrase shorter than the key", ErrPlainHash, hashSpec)
		}
		copy(key, passphrase[:hashed])
		return nil
	}
	newHash, err := hashFunc(name)
	if err != nil {
		return err
	}
	h := newHash()
	out := key[:hashed]
	for round := 0; len(out) > 0; round++ {
		h.Reset()
		for range round {
			h.Write([]byte{'A'})
		}
		h.Write(passphrase)
		sum := h.Sum(nil)
		n := copy(out, sum)
		clear(sum)
		out = out[n:]
	}
	return nil
}
