package luks2

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // LUKS1 headers use it
)

// hashFunc returns the constructor of a hash named as cryptsetup names it
// (gcrypt/OpenSSL names, case-insensitive).
func hashFunc(name string) (func() hash.Hash, error) {
	switch strings.ToLower(name) {
	case "sha1":
		return sha1.New, nil
	case "sha224":
		return sha256.New224, nil
	case "sha256":
		return sha256.New, nil
	case "sha384":
		return sha512.New384, nil
	case "sha512":
		return sha512.New, nil
	case "ripemd160":
		return ripemd160.New, nil
	case "whirlpool":
		return newWhirlpool, nil
	}
	return nil, fmt.Errorf("%w: hash %q is not supported", ErrUnsupported, name)
}
