package luks2

import (
	"math"
	"strconv"
	"strings"
)

// json-c's accessors, which cryptsetup uses to read a field whatever its
// JSON type (a missing field or null is json-c's NULL object).

// strtoll is C's strtoll(s, &end, 10) as json_parse_int64 uses it: leading
// space and a sign, then digits, anything after ignored, saturating; ok is
// false when no digit was read.
func strtoll(s string) (int64, bool) {
	t := strings.TrimLeft(cstr(s), " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	n := len(t) - len(strings.TrimLeft(t, "0123456789"))
	if n == 0 {
		return 0, false
	}
	digits := t[:n]
	if neg {
		digits = "-" + digits
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		if neg {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return v, true
}

// int64Value is json_object_get_int64.
func int64Value(n *node) int64 {
	if n == nil {
		return 0
	}
	switch n.kind {
	case kindNumber:
		if !n.dbl {
			return int64Of(n)
		}
		f := doubleOf(n)
		switch {
		case math.IsNaN(f):
			return math.MinInt64 // C's conversion of NaN on amd64
		case f >= math.MaxInt64:
			return math.MaxInt64
		case f <= math.MinInt64:
			return math.MinInt64
		}
		return int64(f)
	case kindBool:
		if n.b {
			return 1
		}
	case kindString:
		v, _ := strtoll(n.str)
		return v
	}
	return 0
}

// intOf is json_object_get_int (int64 clamped to 32 bits).
func intOf(n *node) int32 {
	if n == nil {
		return 0
	}
	if n.kind == kindString {
		if _, ok := strtoll(n.str); !ok {
			return 0
		}
	}
	if n.kind == kindNumber && n.dbl {
		f := doubleOf(n)
		switch {
		case f <= math.MinInt32:
			return math.MinInt32
		case f >= math.MaxInt32:
			return math.MaxInt32
		case math.IsNaN(f):
			return math.MinInt32
		}
		return int32(f)
	}
	v := int64Value(n)
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}

// doubleOf is a double's value.
func doubleOf(n *node) float64 {
	switch n.str {
	case "NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	f, _ := strconv.ParseFloat(n.str, 64)
	return f
}

// jsonText is json_object_get_string: a string's value (as C reads it),
// any other value's JSON, "(null)" (glibc's printf of NULL) for none.
func jsonText(n *node) string {
	if n == nil || n.kind == kindNull {
		return "(null)"
	}
	if n.kind == kindString {
		return cstr(n.str)
	}
	return string(n.compact())
}

// uint64Of is crypt_jobj_get_uint64: json_str_to_uint64 of the value's
// text (0 when it is no number).
func uint64Of(n *node) uint64 {
	v, _ := strToUint64(jsonText(n))
	return v
}
