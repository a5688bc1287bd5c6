package cmdline

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// ErrNumber is popt's message for a number that does not parse or fit.
var ErrNumber = errors.New("invalid numeric value")

// ParseNumber reads a numeric option's value as cryptsetup 2.6.1 does:
// strtoll/strtoull in base 10 that must take the whole (non-empty) value
// and fit the type (Uint32, Int32, Uint64, where strtoull lets "-1" wrap),
// or a Size with unit suffixes (tools_string_to_size; a bad one is
// "Invalid size specification in parameter --name."). It returns the
// value in decimal.
func ParseNumber(kind Kind, v, name string) (string, error) {
	switch kind {
	case Size:
		n, ok := ParseSize(v)
		if !ok {
			return "", errors.New("Invalid size specification in parameter --" + name + ".")
		}
		return strconv.FormatUint(n, 10), nil
	case Int32:
		n, ok := cStrtoll(v)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return "", ErrNumber
		}
		return strconv.FormatInt(n, 10), nil
	}
	n, ok := cStrtoull(v)
	if !ok || kind == Uint32 && n > math.MaxUint32 {
		return "", ErrNumber
	}
	return strconv.FormatUint(n, 10), nil
}

// cStrtoull is strtoull(v, &end, 10) that must end at the end of v:
// leading white space, a sign ('-' negates modulo 2^64), digits; false on
// anything else or overflow.
func cStrtoull(v string) (uint64, bool) {
	neg, digits, ok := cNumber(v)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// cStrtoll is cStrtoull for strtoll: int64 range, overflow refused.
func cStrtoll(v string) (int64, bool) {
	neg, digits, ok := cNumber(v)
	if !ok {
		return 0, false
	}
	if neg {
		digits = "-" + digits
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// cNumber splits v into strtol's parts: white space, sign, digits (all of
// the rest).
func cNumber(v string) (neg bool, digits string, ok bool) {
	t := strings.TrimLeft(v, " \t\n\v\f\r")
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	if t == "" || strings.Trim(t, "0123456789") != "" {
		return false, "", false
	}
	return neg, t, true
}

// ParseSize is cryptsetup's tools_string_to_size: digits first, then an
// optional unit: s/S (512 bytes); k, m, g, t (any case) alone or with
// "iB" (1024 based), or with "B" (1000 based); no overflow.
func ParseSize(v string) (uint64, bool) {
	end := len(v) - len(strings.TrimLeft(v, "0123456789"))
	if end == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:end], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := v[end:]
	if unit == "" {
		return n, true
	}
	base := uint64(1024)
	switch {
	case len(unit) == 2 && unit[1] == 'B':
		base = 1000
	case len(unit) == 3 && unit[1:] == "iB", len(unit) == 1:
	default:
		return 0, false
	}
	var mult uint64
	switch unit[0] {
	case 's', 'S':
		mult = 512
	case 'k', 'K':
		mult = base
	case 'm', 'M':
		mult = base * base
	case 'g', 'G':
		mult = base * base * base
	case 't', 'T':
		mult = base * base * base * base
	default:
		return 0, false
	}
	if n != 0 && n*mult/n != mult {
		return 0, false
	}
	return n * mult, true
}
