package luks2

import (
	"fmt"
	"time"

	"github.com/luksd/luksd/dmcrypt"
)

// Families compared by `luksFormat --cipher auto`.
const (
	autoXTS      = "aes-xts-plain64"
	autoAdiantum = "xchacha12,aes-adiantum-plain64"
)

// cipherRace measures AES-XTS and xchacha12 Adiantum, each with its
// default key size, on this CPU with 4096-byte sectors. adiantum is 0 when
// it is not available.
func cipherRace() (xts, adiantum float64) {
	const d = 100 * time.Millisecond
	if e, dd, err := dmcrypt.Speed(autoXTS, DefaultKeySize(autoXTS), 4096, 1<<20, d); err == nil {
		xts = (e + dd) / 2
	}
	if e, dd, err := dmcrypt.Speed(autoAdiantum, DefaultKeySize(autoAdiantum), 4096, 1<<20, d); err == nil {
		adiantum = (e + dd) / 2
	}
	return xts, adiantum
}

// AutoCipher picks the cipher for `luksFormat --cipher auto`: AES-XTS where
// it is faster on this CPU, else xchacha12 Adiantum with 4096-byte sectors
// (sectorSize 0: the default). Either takes its default key size. reason
// says what was measured.
func AutoCipher() (spec string, sectorSize int, reason string) {
	x, a := cipherRace()
	if a > x {
		return autoAdiantum, 4096, fmt.Sprintf(
			"xchacha12,aes-adiantum runs at %.0f MiB/s on this CPU, aes-xts at %.0f MiB/s", a, x)
	}
	if a == 0 {
		return autoXTS, 0, fmt.Sprintf("aes-xts runs at %.0f MiB/s on this CPU; Adiantum is not available", x)
	}
	return autoXTS, 0, fmt.Sprintf(
		"aes-xts runs at %.0f MiB/s on this CPU, xchacha12,aes-adiantum at %.0f MiB/s", x, a)
}
