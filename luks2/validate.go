package luks2

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// validateHeader checks a header copy's metadata exactly as cryptsetup
// 2.6.1's LUKS2_hdr_validate does (lib/luks2/luks2_json_metadata.c): a copy
// it refuses, luksd refuses, and one it accepts, luksd accepts, however
// odd a keyslot or token in it (those are refused when used). jsonSize is
// the size of the copy's JSON area.
func validateHeader(root *node, jsonSize uint64) error {
	for _, check := range []func(*node) error{
		validateRequirements, validateTokens, validateDigests, validateSegments,
		validateKeyslots, validateConfig, validateAreas,
	} {
		if err := check(root); err != nil {
			return err
		}
	}
	if err := validateJSONSize(root, jsonSize); err != nil {
		return err
	}
	return validateKeyslotTypes(root)
}

// validateOrRepair is cryptsetup's validate_luks2_json_object: when a copy
// fails, the known glitches of luks2 keyslots (extra kdf fields) are
// removed from it, and it is validated again.
func validateOrRepair(root *node, jsonSize uint64) error {
	if validateHeader(root, jsonSize) == nil {
		return nil
	}
	repairKeyslots(root)
	return validateHeader(root, jsonSize)
}

// invalid formats a validation failure.
func invalid(format string, a ...any) error {
	return fmt.Errorf("invalid LUKS2 metadata: "+format, a...)
}

// cstr is s as C reads it: up to its first NUL.
func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// contains is json_contains: o[key] exists and is of kind (for numbers,
// see containsInt).
func contains(o *node, key string, kind nodeKind) *node {
	if v := o.get(key); v != nil && v.kind == kind {
		return v
	}
	return nil
}

// containsInt is json_contains with json_type_int.
func containsInt(o *node, key string) *node {
	if v := o.get(key); v.isInt() {
		return v
	}
	return nil
}

// containsString is json_contains_string: a non-empty string.
func containsString(o *node, key string) *node {
	if v := o.get(key); v != nil && v.kind == kindString && cstr(v.str) != "" {
		return v
	}
	return nil
}

// numbered is cryptsetup's numbered(): every character a digit (an empty
// key passes).
func numbered(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// strToUint64 is json_str_to_uint64: strtoull(s, &end, 10) that must end
// the string (leading spaces and a sign allowed, "-1" wraps).
func strToUint64(s string) (uint64, bool) {
	s = cstr(s)
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	digits := len(t) - len(strings.TrimLeft(t, "0123456789"))
	if digits == 0 {
		return 0, s == "" // no conversion: end is s itself
	}
	if digits != len(t) {
		return 0, false
	}
	u, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, false // ERANGE
	}
	if neg {
		u = -u
	}
	return u, true
}

// int64Of is json_object_get_int64 of a JSON integer (saturated, as json-c
// stores it).
func int64Of(n *node) int64 {
	if i, err := strconv.ParseInt(n.str, 10, 64); err == nil {
		return i
	}
	if strings.HasPrefix(n.str, "-") {
		return math.MinInt64
	}
	return math.MaxInt64
}

// isUint32 is validate_json_uint32.
func isUint32(n *node) bool {
	v := int64Of(n)
	return v >= 0 && v <= math.MaxUint32
}

func validateRequirements(root *node) error {
	config := contains(root, "config", kindObject)
	if config == nil {
		return invalid("no config object")
	}
	reqs := config.get("requirements")
	if reqs == nil {
		return nil
	}
	if reqs.kind != kindObject {
		return invalid("config requirements is not an object")
	}
	mand := reqs.get("mandatory")
	if mand == nil {
		return nil
	}
	if mand.kind != kindArray {
		return invalid("mandatory requirements is not an array")
	}
	online := 0
	for _, r := range mand.vals {
		if r.kind != kindString {
			return invalid("a mandatory requirement is not a string")
		}
		if reencryptFlag(cstr(r.str)) {
			online++
		}
	}
	if online > 1 {
		return invalid("more than one online reencryption requirement")
	}
	return nil
}

// reencryptFlag is reencrypt_candidate_flag: online-reencrypt, or
// online-reencrypt-vN.
func reencryptFlag(s string) bool {
	v, ok := strings.CutPrefix(s, "online-reencrypt-v")
	return s == "online-reencrypt" || ok && v != "" && numbered(v)
}

// keyslotsNamed is validate_keyslots_array (segments alike): every entry
// a string naming an object of section.
func keyslotsNamed(arr, section *node) bool {
	for _, v := range arr.vals {
		if v.kind != kindString || contains(section, cstr(v.str), kindObject) == nil {
			return false
		}
	}
	return true
}

func validateTokens(root *node) error {
	tokens := contains(root, "tokens", kindObject)
	if tokens == nil {
		return invalid("no tokens object")
	}
	keyslots := root.get("keyslots")
	for i, key := range tokens.keys {
		if !numbered(key) {
			return invalid("token %q is not numbered", key)
		}
		t := tokens.vals[i]
		if keyslots == nil || containsString(t, "type") == nil {
			return invalid("token %s has no type", key)
		}
		arr := contains(t, "keyslots", kindArray)
		if arr == nil || !keyslotsNamed(arr, keyslots) {
			return invalid("token %s names a missing keyslot", key)
		}
	}
	return nil
}

func validateDigests(root *node) error {
	digests := contains(root, "digests", kindObject)
	keyslots := contains(root, "keyslots", kindObject)
	segments := contains(root, "segments", kindObject)
	if digests == nil || keyslots == nil || segments == nil {
		return invalid("no digests, keyslots or segments object")
	}
	return eachTyped(digests, "digest", func(key string, d *node) error {
		ks, segs := contains(d, "keyslots", kindArray), contains(d, "segments", kindArray)
		if ks == nil || segs == nil || !keyslotsNamed(ks, keyslots) || !keyslotsNamed(segs, segments) {
			return invalid("digest %s names a missing keyslot or segment", key)
		}
		return nil
	})
}

func validateKeyslots(root *node) error {
	keyslots := contains(root, "keyslots", kindObject)
	if keyslots == nil {
		return invalid("no keyslots object")
	}
	return eachTyped(keyslots, "keyslot", func(key string, k *node) error {
		if ks := containsInt(k, "key_size"); ks == nil || !isUint32(ks) {
			return invalid("keyslot %s key_size is not a 32-bit number", key)
		}
		return nil
	})
}

// eachTyped checks that each member of obj is numbered and has a type,
// then runs check on it; what names a member in the error.
func eachTyped(obj *node, what string, check func(key string, v *node) error) error {
	for i, key := range obj.keys {
		v := obj.vals[i]
		if !numbered(key) || containsString(v, "type") == nil {
			return invalid("%s %q has no type", what, key)
		}
		if err := check(key, v); err != nil {
			return err
		}
	}
	return nil
}

func validateConfig(root *node) error {
	config := contains(root, "config", kindObject)
	if config == nil {
		return invalid("no config object")
	}
	js, ks := containsString(config, "json_size"), containsString(config, "keyslots_size")
	if js == nil || ks == nil {
		return invalid("config json_size or keyslots_size missing")
	}
	metadata, ok1 := strToUint64(js.str)
	keyslotsSize, ok2 := strToUint64(ks.str)
	if !ok1 || !ok2 {
		return invalid("config json_size or keyslots_size is not a number")
	}
	metadata += binHeaderSize
	if !validHdrSize(int64(metadata)) || metadata > math.MaxInt64 {
		return invalid("unsupported metadata size %d", metadata)
	}
	if keyslotsSize%keyslotsAlign != 0 || keyslotsSize > maxKeyslotsSize {
		return invalid("unsupported keyslots size %d", keyslotsSize)
	}
	if off := minSegmentOffset(root.get("segments")); off != 0 &&
		(off < keyslotsSize || off-keyslotsSize < 2*metadata) {
		return invalid("keyslots_size %d does not fit before the data offset %d", keyslotsSize, off)
	}
	if flags := config.get("flags"); flags != nil && !stringArray(flags) {
		return invalid("config flags is not an array of strings")
	}
	return nil
}

// stringArray reports whether n is an array of strings.
func stringArray(n *node) bool {
	if n.kind != kindArray {
		return false
	}
	for _, v := range n.vals {
		if v.kind != kindString {
			return false
		}
	}
	return true
}

// minSegmentOffset is json_segments_get_minimal_offset: the lowest offset
// of a segment that is no backup, 0 when one has offset 0.
func minSegmentOffset(segments *node) uint64 {
	if segments == nil {
		return 0
	}
	low := uint64(math.MaxUint64)
	for _, s := range segments.vals {
		if isBackupSegment(s) {
			continue
		}
		off := segmentOffset(s)
		if off == 0 {
			return 0
		}
		low = min(low, off)
	}
	return low
}

// segmentOffset and segmentSize read a segment's fields as cryptsetup's
// json_segment_get_offset/size do (0 when not a number: size "dynamic").
func segmentOffset(s *node) uint64 { return uint64Field(s, "offset") }
func segmentSize(s *node) uint64   { return uint64Field(s, "size") }

func uint64Field(o *node, key string) uint64 {
	v := o.get(key)
	if v == nil {
		return 0
	}
	u, _ := strToUint64(v.str)
	return u
}

// segmentFlag is json_segment_contains_flag: a flag equal to flag, or with
// prefix flag when prefix is set.
func segmentFlag(s *node, flag string, prefix bool) bool {
	flags := s.get("flags")
	if flags == nil {
		return false
	}
	for _, f := range flags.vals {
		v := cstr(f.str)
		if v == flag || prefix && strings.HasPrefix(v, flag) {
			return true
		}
	}
	return false
}

func isBackupSegment(s *node) bool { return segmentFlag(s, "backup-", true) }

// interval is a byte range by offset and length (0 length: to the end).
type interval struct{ off, len uint64 }

func validateAreas(root *node) error {
	keyslots := root.get("keyslots")
	if keyslots == nil || root.get("segments") == nil {
		return invalid("no keyslots or segments object")
	}
	metadata := uint64Field(root.get("config"), "json_size") + binHeaderSize
	end := 2*metadata + uint64Field(root.get("config"), "keyslots_size")
	var areas []interval
	for i, key := range keyslots.keys {
		area := contains(keyslots.vals[i], "area", kindObject)
		if area == nil || containsString(area, "type") == nil {
			return invalid("keyslot %s has no area", key)
		}
		off, size := containsString(area, "offset"), containsString(area, "size")
		if off == nil || size == nil || !numbered(cstr(off.str)) || !numbered(cstr(size.str)) {
			return invalid("keyslot %s area offset or size is not a number", key)
		}
		o, ok1 := strToUint64(off.str)
		l, ok2 := strToUint64(size.str)
		if !ok1 || !ok2 {
			return invalid("keyslot %s area offset or size is out of range", key)
		}
		areas = append(areas, interval{o, l})
	}
	for i, a := range areas {
		if a.off < 2*metadata || a.len == 0 || a.off > math.MaxUint64-a.len || a.off+a.len > end {
			return invalid("keyslot area [%d, +%d) is not inside the keyslots area", a.off, a.len)
		}
		for j, b := range areas {
			if i != j && (b.off > math.MaxUint64-b.len || a.off >= b.off && a.off < b.off+b.len) {
				return invalid("keyslot areas at %d and %d overlap", a.off, b.off)
			}
		}
	}
	return nil
}

func validateJSONSize(root *node, jsonSize uint64) error {
	declared, _ := strToUint64(root.get("config").get("json_size").str)
	if declared != jsonSize {
		return invalid("json_size %d does not match the header's JSON area of %d bytes", declared, jsonSize)
	}
	if uint64(len(root.compact())) > declared {
		return invalid("the JSON does not fit its area")
	}
	return nil
}

// atoi is C's atoi for a numbered key (saturating).
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil && s != "" {
		return math.MaxInt32
	}
	return n
}
