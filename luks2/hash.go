package luks2

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/blake2s"
	//lint:ignore SA1019 read where a header names it; see below.
	"golang.org/x/crypto/ripemd160"
)

// RIPEMD-160 stays, from golang.org/x/crypto/ripemd160, though that
// package is deprecated (frozen: no fixes, no faster code). luksd never
// picks it itself; it is used where a header names it (header checksum,
// PBKDF2, AF or digest hash), where --hash asks for it, and by benchmark.
// cryptsetup 2.6.1 still takes --hash ripemd160 and older releases offered
// it, so such volumes exist and must open, and edits must keep it. Its
// output is checked against cryptsetup's in luks1_edit_test.go and
// pbkdf_test.go. The cost is speed: PBKDF2-ripemd160 runs at about two
// thirds of cryptsetup's (0.72 against 1.08 million iterations a second
// here, `luksd benchmark` beside `cryptsetup benchmark --hash ripemd160`),
// so a keyslot cryptsetup calibrated takes about 1.5 times as long to
// open. Replace it only with a RIPEMD-160 of luksd's own, as whirlpool.go
// is for Whirlpool.

// hashes maps the digest names cryptsetup 2.6.1 resolves through OpenSSL 3
// (Debian's backend: EVP_MD_fetch, case-insensitive, with OpenSSL's
// aliases, and cryptsetup's blake2 spellings) to Go's constructors. Header
// checksums, PBKDF2, AF and digests all take these names.
var hashes = map[string]func() hash.Hash{
	"md5":          md5.New,
	"ssl3-md5":     md5.New,
	"sha1":         sha1.New,
	"sha-1":        sha1.New,
	"ssl3-sha1":    sha1.New,
	"sha224":       sha256.New224,
	"sha2-224":     sha256.New224,
	"sha-224":      sha256.New224,
	"sha256":       sha256.New,
	"sha2-256":     sha256.New,
	"sha-256":      sha256.New,
	"sha384":       sha512.New384,
	"sha2-384":     sha512.New384,
	"sha-384":      sha512.New384,
	"sha512":       sha512.New,
	"sha2-512":     sha512.New,
	"sha-512":      sha512.New,
	"sha512-224":   sha512.New512_224,
	"sha2-512/224": sha512.New512_224,
	"sha-512/224":  sha512.New512_224,
	"sha512-256":   sha512.New512_256,
	"sha2-512/256": sha512.New512_256,
	"sha-512/256":  sha512.New512_256,
	"sha3-224":     func() hash.Hash { return sha3.New224() },
	"sha3-256":     func() hash.Hash { return sha3.New256() },
	"sha3-384":     func() hash.Hash { return sha3.New384() },
	"sha3-512":     func() hash.Hash { return sha3.New512() },
	"ripemd160":    ripemd160.New,
	"ripemd-160":   ripemd160.New,
	"ripemd":       ripemd160.New,
	"rmd160":       ripemd160.New,
	"whirlpool":    newWhirlpool,
	"blake2b512":   mustBlake(blake2b.New512),
	"blake2b-512":  mustBlake(blake2b.New512),
	"blake2s256":   mustBlake(blake2s.New256),
	"blake2s-256":  mustBlake(blake2s.New256),
}

// mustBlake adapts an unkeyed blake2 constructor.
func mustBlake(f func(key []byte) (hash.Hash, error)) func() hash.Hash {
	return func() hash.Hash {
		h, _ := f(nil) // never fails without a key
		return h
	}
}

// hashFunc returns the constructor of a hash named as cryptsetup names it.
// HashSupported reports whether luksd knows the hash cryptsetup names
// name (PBKDF2, AF and digest hashes).
func HashSupported(name string) bool {
	_, err := hashFunc(name)
	return err == nil
}

func hashFunc(name string) (func() hash.Hash, error) {
	if h, ok := hashes[strings.ToLower(name)]; ok {
		return h, nil
	}
	return nil, fmt.Errorf("%w: hash %q is not supported", ErrUnsupported, name)
}
