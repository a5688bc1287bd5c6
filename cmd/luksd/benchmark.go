package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// benchCipher is one row of the cipher table, in cryptsetup's order.
type benchCipher struct {
	cipher, mode string // as printed: "aes", "xts"
	keyBits      int
	iv           string // the IV generator used for the measurement
}

var benchCiphers = []benchCipher{
	{"aes", "cbc", 128, "plain64"},
	{"serpent", "cbc", 128, "plain64"},
	{"twofish", "cbc", 128, "plain64"},
	{"aes", "cbc", 256, "plain64"},
	{"serpent", "cbc", 256, "plain64"},
	{"twofish", "cbc", 256, "plain64"},
	{"aes", "xts", 256, "plain64"},
	{"serpent", "xts", 256, "plain64"},
	{"twofish", "xts", 256, "plain64"},
	{"aes", "xts", 512, "plain64"},
	{"serpent", "xts", 512, "plain64"},
	{"twofish", "xts", 512, "plain64"},
	{"xchacha12,aes", "adiantum", 256, "plain64"},
	{"xchacha20,aes", "adiantum", 256, "plain64"},
}

const (
	// benchBufferSize is the buffer each measurement en- and decrypts, as
	// in cryptsetup's benchmark.
	benchBufferSize = 1 << 20
	// benchTime is how long each direction of a cipher is measured.
	benchTime = 500 * time.Millisecond
)

func init() {
	register(&cli.Command{
		Name:  "benchmark",
		Usage: "measure the PBKDFs and luksd's sector ciphers on one core",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cipher", Aliases: []string{"c"}, Usage: "one cipher (e.g. aes-xts or aes-xts-plain64)"},
			&cli.IntFlag{Name: "key-size", Aliases: []string{"s"}, Usage: "key size in bits (default 256)"},
			&cli.IntFlag{Name: "sector-size", Value: 512, Usage: "sector size in bytes"},
			&cli.StringFlag{Name: "pbkdf", Usage: "one PBKDF (pbkdf2, argon2i, argon2id)"},
			&cli.StringFlag{Name: "hash", Aliases: []string{"h"}, Usage: "hash for pbkdf2"},
			&cli.IntFlag{Name: "iter-time", Aliases: []string{"i"}, Value: 2000, Usage: "argon2 target time in ms"},
			&cli.IntFlag{Name: "pbkdf-memory", Usage: "argon2 maximum memory in KiB"},
			&cli.IntFlag{Name: "pbkdf-parallel", Usage: "argon2 maximum threads"},
		},
		Action: runBenchmark,
	})
}

func runBenchmark(c *cli.Context) error {
	ss := c.Int("sector-size")
	if !luks2.ValidSectorSize(2, ss) {
		return usageErrorf("Unsupported encryption sector size.")
	}
	keyBits := c.Int("key-size")
	if keyBits == 0 {
		keyBits = 256 // cryptsetup's DEFAULT_PLAIN_KEYBITS, for every cipher
	}
	if keyBits <= 0 || keyBits%8 != 0 {
		return usageErrorf("Key size must be a multiple of 8 bits")
	}
	fmt.Println("# Tests are approximate using memory only (no storage IO).")
	switch {
	case c.IsSet("pbkdf") || c.IsSet("hash"):
		return benchPBKDFs(c, keyBits)
	case c.IsSet("cipher"):
		return benchOneCipher(c.String("cipher"), keyBits, ss)
	}
	if err := benchPBKDFs(c, keyBits); err != nil {
		return err
	}
	fmt.Println("#     Algorithm |       Key |      Encryption |      Decryption")
	for _, r := range benchCiphers {
		name := r.cipher + "-" + r.mode
		enc, dec, err := dmcrypt.Speed(name+"-"+r.iv, r.keyBits/8, ss, benchBufferSize, benchTime)
		if err != nil {
			fmt.Printf("%15s  %9db %17s %17s\n", name, r.keyBits, "N/A", "N/A")
			continue
		}
		fmt.Printf("%15s  %9db  %10.1f MiB/s  %10.1f MiB/s\n", name, r.keyBits, enc, dec)
	}
	return nil
}

// benchOneCipher prints the one-row table of `benchmark --cipher`, its
// header right-aligned to the cipher name as cryptsetup aligns it.
func benchOneCipher(spec string, keyBits, sectorSize int) error {
	parts := strings.SplitN(spec, "-", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return exitf(exitParams, "No known cipher specification pattern detected.")
	}
	cipher, mode, iv := parts[0], parts[1], "plain64"
	if len(parts) == 3 {
		iv = parts[2]
	}
	enc, dec, err := dmcrypt.Speed(cipher+"-"+mode+"-"+iv, keyBits/8, sectorSize, benchBufferSize, benchTime)
	if err != nil {
		return exitf(exitParams, "Cipher %s (with %d bits key) is not available.", spec, keyBits)
	}
	width := max(len(cipher)+len(mode)+1, 11)
	fmt.Printf("#%*s Algorithm |       Key |      Encryption |      Decryption\n", width-11, "")
	fmt.Printf("%*s-%s  %9db  %10.1f MiB/s  %10.1f MiB/s\n", width-len(mode)-1, cipher, mode, keyBits, enc, dec)
	return nil
}
