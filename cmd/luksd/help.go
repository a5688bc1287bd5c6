package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// writeCompiledDefaults writes the end of `luksd --help`: cryptsetup
// 2.6.1's "Default compiled-in" block in its layout, with luksd's values
// (which are cryptsetup's), then the defaults only luksd has.
func writeCompiledDefaults(w io.Writer) {
	xtsBits := luks2.DefaultKeySize("aes-xts-plain64") * 8
	fmt.Fprintf(w, `
Default compiled-in metadata format is LUKS2 (for luksFormat action).

Default compiled-in key and passphrase parameters:
	Maximum keyfile size: %dkB, Maximum interactive passphrase length 512 (characters)
Default PBKDF for LUKS1: pbkdf2, iteration time: 2000 (ms)
Default PBKDF for LUKS2: argon2id
	Iteration time: 2000, Memory required: 1048576kB, Parallel threads: 4

Default compiled-in device cipher parameters:
	LUKS: aes-xts-plain64, Key: %d bits, LUKS header hashing: sha256, RNG: /dev/urandom
	LUKS: Default keysize with XTS mode (two internal keys) will be doubled.

luksd's own defaults:
	Sector size: 4096 (512 for LUKS1, or where the data area is not a multiple of 4096)
	--cipher auto: aes-xts-plain64 (%d bits) where the CPU has AES instructions, else xchacha12,aes-adiantum-plain64 (%d bits)
	open --frontend auto: ublk where ublk_drv loads, else nbd
	open --mapping auto: /dev/mapper/NAME is a device-mapper linear mapping where the kernel has device-mapper, else a symlink
	Boot: /etc/luksdtab (crypttab format) through luksd-generator
`, keyring.MaxKeyFileSize>>10, xtsBits/2, xtsBits, luks2.DefaultKeySize("xchacha12,aes-adiantum-plain64")*8)
}

// nearestAction returns the visible verb closest to verb when it is close
// enough to be a typo (a third of its letters at most, and at least one),
// or "".
func nearestAction(app *cli.App, verb string) string {
	best, bestDist := "", max(2, len(verb)/3)+1
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		for _, name := range append([]string{c.Name}, c.Aliases...) {
			if d := editDistance(strings.ToLower(verb), strings.ToLower(name)); d < bestDist {
				best, bestDist = name, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
