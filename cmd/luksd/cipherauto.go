package main

import (
	"fmt"
	"time"
)

// Families compared by `luksFormat --cipher auto`.
const (
	autoXTS      = "aes-xts-plain64"
	autoAdiantum = "xchacha12,aes-adiantum-plain64"
)

// autoMargin is how much faster Adiantum must be before luksFormat without
// --cipher hints at it: below this the default (AES-XTS, what every distro
// and cryptsetup pick) is the better-known choice.
const autoMargin = 1.5

// cipherRace measures AES-XTS (512-bit key) and xchacha12 Adiantum on this
// CPU with 4096-byte sectors. adiantum is 0 when it is not available.
func cipherRace() (xts, adiantum float64) {
	const d = 100 * time.Millisecond
	if e, dd, err := cipherSpeed(autoXTS, 64, 4096, 1<<20, d); err == nil {
		xts = (e + dd) / 2
	}
	if e, dd, err := cipherSpeed(autoAdiantum, 32, 4096, 1<<20, d); err == nil {
		adiantum = (e + dd) / 2
	}
	return xts, adiantum
}

// autoCipher picks the cipher for `luksFormat --cipher auto`: AES-XTS with a
// 512-bit key where it is faster on this CPU, else xchacha12 Adiantum with
// 4096-byte sectors. reason says what was measured.
func autoCipher() (spec string, keyBits int, sectorSize int, reason string) {
	x, a := cipherRace()
	if a > x {
		return autoAdiantum, 256, 4096, fmt.Sprintf(
			"xchacha12,aes-adiantum runs at %.0f MiB/s on this CPU, aes-xts at %.0f MiB/s", a, x)
	}
	if a == 0 {
		return autoXTS, 512, 0, fmt.Sprintf("aes-xts runs at %.0f MiB/s on this CPU; Adiantum is not available", x)
	}
	return autoXTS, 512, 0, fmt.Sprintf(
		"aes-xts runs at %.0f MiB/s on this CPU, xchacha12,aes-adiantum at %.0f MiB/s", x, a)
}

// adiantumHint returns a one-line hint when Adiantum would be much faster
// than the default AES-XTS here, else "".
func adiantumHint() string {
	x, a := cipherRace()
	if a > x*autoMargin {
		return fmt.Sprintf("Hint: this CPU runs xchacha12,aes-adiantum-plain64 %.1fx faster than aes-xts-plain64 (%.0f vs %.0f MiB/s); consider --cipher auto.", a/x, a, x)
	}
	return ""
}
