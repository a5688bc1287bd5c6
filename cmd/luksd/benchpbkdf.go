package main

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // LUKS1 volumes still use it
)

// pbkdf2Hashes are the rows of the PBKDF2 part, in cryptsetup's order.
var pbkdf2Hashes = []struct {
	name string
	h    func() hash.Hash
}{
	{"sha1", sha1.New},
	{"sha256", sha256.New},
	{"sha512", sha512.New},
	{"ripemd160", ripemd160.New},
	{"whirlpool", nil},
}

// benchPBKDFs prints cryptsetup benchmark's PBKDF lines (all of them, or the
// one --pbkdf/--hash selects).
func benchPBKDFs(c *cli.Context, keyBits int) error {
	kind := c.String("pbkdf")
	if kind == "" && c.IsSet("hash") {
		kind = "pbkdf2"
	}
	if kind == "" || kind == "pbkdf2" {
		for _, h := range pbkdf2Hashes {
			if want := c.String("hash"); want != "" && want != h.name {
				continue
			}
			if h.h == nil {
				fmt.Printf("PBKDF2-%-9s     N/A\n", h.name)
				continue
			}
			fmt.Printf("PBKDF2-%-9s %7d iterations per second for %d-bit key\n", h.name, pbkdf2PerSecond(h.h, keyBits/8), keyBits)
		}
	}
	if kind != "pbkdf2" {
		return benchArgon2(c, kind, keyBits)
	}
	return nil
}

// pbkdf2PerSecond measures PBKDF2 iterations per second for a keyLen-byte key,
// growing the iteration count until one run takes at least 250 ms.
func pbkdf2PerSecond(h func() hash.Hash, keyLen int) int {
	for iter := 1000; ; iter *= 2 {
		start := time.Now()
		pbkdf2.Key(h, "foo", []byte("0123456789abcdef"), iter, keyLen)
		if d := time.Since(start); d >= 250*time.Millisecond || iter >= 1<<30 {
			return int(float64(iter) / d.Seconds())
		}
	}
}
