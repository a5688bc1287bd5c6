package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/luksd/luksd/luks2"
)

// benchHashes are the PBKDF2 rows, in cryptsetup's order.
var benchHashes = []string{"sha1", "sha256", "sha512", "ripemd160", "whirlpool"}

// benchPBKDFs prints cryptsetup benchmark's PBKDF lines: all of them, or the
// one --pbkdf / --hash selects (runBenchmark has checked --pbkdf).
func benchPBKDFs(c *cli.Context, keyBits int) error {
	kind := c.String("pbkdf")
	if kind == "" && c.IsSet("hash") {
		kind = "pbkdf2"
	}
	if kind == "" || kind == "pbkdf2" {
		hashes := benchHashes
		if c.IsSet("hash") {
			hashes = []string{c.String("hash")}
		}
		for _, h := range hashes {
			// Calibrating to one second gives iterations per second.
			p, err := luks2.Calibrate(luks2.PBKDF{Type: "pbkdf2", Hash: h, IterTime: time.Second}, keyBits/8)
			if err != nil {
				fmt.Printf("PBKDF2-%-9s     N/A\n", h)
				if c.IsSet("hash") {
					// The one hash asked for is not there: cryptsetup
					// exits 1 after the N/A line.
					return exitf(exitParams, "")
				}
				continue
			}
			fmt.Printf("PBKDF2-%-9s %7d iterations per second for %d-bit key\n", h, p.Iterations, keyBits)
		}
	}
	for _, typ := range []string{"argon2i", "argon2id"} {
		if kind != "" && kind != typ {
			continue
		}
		p, err := luks2.Calibrate(luks2.PBKDF{
			Type:      typ,
			IterTime:  time.Duration(c.Int("iter-time")) * time.Millisecond,
			MemoryKiB: c.Int("pbkdf-memory"),
			Parallel:  benchParallel(c),
		}, keyBits/8)
		if err != nil {
			fmt.Printf("%-10s N/A\n", typ)
			continue
		}
		fmt.Printf("%-10s %4d iterations, %5d memory, %1d parallel threads (CPUs) for %d-bit key (requested %d ms time)\n",
			typ, p.Iterations, p.MemoryKiB, p.Parallel, keyBits, p.IterTime.Milliseconds())
	}
	return nil
}

// benchParallel is --pbkdf-parallel, else cryptsetup's default of 4
// threads, which its benchmark measures with whatever the CPU count (a
// volume's keyslot gets at most one per CPU).
func benchParallel(c *cli.Context) int {
	if c.IsSet("pbkdf-parallel") {
		return c.Int("pbkdf-parallel")
	}
	return 4
}
