package luks2

import (
	"fmt"
	"math"
	"strconv"
)

// The segment and keyslot halves of validateHeader.

func validateSegments(root *node) error {
	segments := contains(root, "segments", kindObject)
	if segments == nil || len(segments.keys) == 0 {
		return invalid("no segments")
	}
	digests := root.get("digests")
	if digests == nil {
		return invalid("no digests object")
	}
	firstBackup := -1
	for i, key := range segments.keys {
		s := segments.vals[i]
		if err := validateSegment(key, s, digests); err != nil {
			return err
		}
		id := atoi(key)
		if isBackupSegment(s) {
			if firstBackup < 0 || id < firstBackup {
				firstBackup = id
			}
		} else if firstBackup >= 0 && id >= firstBackup {
			return invalid("regular segment %d is behind backup segment %d", id, firstBackup)
		}
	}
	count := len(segments.keys)
	switch {
	case firstBackup == 0:
		return invalid("no regular segment")
	case firstBackup >= count:
		return invalid("gap between the regular and the backup segments")
	case firstBackup < 0:
		firstBackup = count
	}
	var regular []interval
	for i := 0; i < firstBackup; i++ {
		s := segments.get(strconv.Itoa(i))
		if s == nil {
			return invalid("no segment %d", i)
		}
		size := segmentSize(s)
		if size == 0 {
			size = math.MaxUint64 // dynamic
		}
		regular = append(regular, interval{segmentOffset(s), size})
	}
	if err := segmentsApart(regular); err != nil {
		return err
	}
	for i := firstBackup; i < count; i++ {
		if segments.get(strconv.Itoa(i)) == nil {
			return invalid("no segment %d", i)
		}
	}
	return validateReencryptSegments(root, segments, firstBackup, count)
}

// validateSegment checks one segment's own fields.
func validateSegment(key string, s, digests *node) error {
	if !numbered(key) {
		return invalid("segment %q is not numbered", key)
	}
	typ, off, size := containsString(s, "type"), containsString(s, "offset"), containsString(s, "size")
	if typ == nil || off == nil || size == nil || !numbered(cstr(off.str)) {
		return invalid("segment %s has no type, offset or size", key)
	}
	offset, ok := strToUint64(off.str)
	if !ok {
		return invalid("segment %s offset is out of range", key)
	}
	var length uint64
	if cstr(size.str) != "dynamic" {
		if !numbered(cstr(size.str)) {
			return invalid("segment %s size is not a number", key)
		}
		if length, ok = strToUint64(size.str); !ok || length == 0 {
			return invalid("segment %s has an illegal size", key)
		}
	}
	if offset%512 != 0 || length%512 != 0 {
		return invalid("segment %s offset or size is not aligned to 512 bytes", key)
	}
	if s.get("flags") != nil && !stringArray(s.get("flags")) {
		return invalid("segment %s flags is not an array of strings", key)
	}
	if cstr(typ.str) == "crypt" {
		return validateCryptSegment(key, s, digests, length)
	}
	return nil
}

// validateCryptSegment is hdr_validate_crypt_segment.
func validateCryptSegment(key string, s, digests *node, size uint64) error {
	iv := containsString(s, "iv_tweak")
	sector := containsInt(s, "sector_size")
	if iv == nil || containsString(s, "encryption") == nil || sector == nil {
		return invalid("crypt segment %s lacks iv_tweak, encryption or sector_size", key)
	}
	if in := s.get("integrity"); in != nil {
		if in.kind != kindObject || containsString(in, "type") == nil ||
			containsString(in, "journal_encryption") == nil || containsString(in, "journal_integrity") == nil {
			return invalid("crypt segment %s has a malformed integrity object", key)
		}
	}
	if !isUint32(sector) {
		return invalid("crypt segment %s sector_size is not a 32-bit number", key)
	}
	ss := uint64(uint32(int64Of(sector)))
	if ss == 0 || ss%512 != 0 {
		return invalid("crypt segment %s has illegal sector size %d", key, ss)
	}
	if _, ok := strToUint64(iv.str); !numbered(cstr(iv.str)) || !ok {
		return invalid("crypt segment %s has an illegal iv_tweak", key)
	}
	if size%ss != 0 {
		return invalid("crypt segment %s size is not aligned to its sector size", key)
	}
	for _, d := range digests.vals {
		if segs := d.get("segments"); segs != nil && arrayHolds(segs, key) {
			return nil
		}
	}
	return invalid("crypt segment %s has no digest", key)
}

// segmentsApart is validate_segment_intervals: only the last segment is
// dynamic (length MaxUint64), and none overlap.
func segmentsApart(ix []interval) error {
	for i, a := range ix {
		if a.len == math.MaxUint64 && i != len(ix)-1 {
			return invalid("only the last segment may be dynamic")
		}
		for j, b := range ix {
			if i == j {
				continue
			}
			if b.len != math.MaxUint64 && b.off > math.MaxUint64-b.len {
				return invalid("segment offset and size overflow")
			}
			if a.off >= b.off && (b.len == math.MaxUint64 || a.off < b.off+b.len) {
				return invalid("segments %d and %d overlap", i, j)
			}
		}
	}
	return nil
}

// validateReencryptSegments is validate_reencrypt_segments: while online
// reencryption is required, the backup segments exist and the regular
// ones match them.
func validateReencryptSegments(root, segments *node, firstBackup, count int) error {
	if !requires(root, isOnlineReencrypt) {
		return nil
	}
	var final, previous *node
	for i := firstBackup; i < count; i++ {
		s := segments.get(strconv.Itoa(i))
		if segmentFlag(s, "backup-final", false) {
			final = s
		} else if segmentFlag(s, "backup-previous", false) {
			previous = s
		}
	}
	if final == nil || previous == nil {
		return invalid("a reencryption backup segment is missing")
	}
	for i := 0; i < firstBackup; i++ {
		s := segments.get(strconv.Itoa(i))
		if segmentFlag(s, "in-reencryption", false) {
			if !sameSegment(s, final) {
				return invalid("segment in reencryption does not match the final backup segment")
			}
			continue
		}
		if !sameSegment(s, final) && !sameSegment(s, previous) {
			return invalid("segment %d matches neither backup segment", i)
		}
	}
	return nil
}

// sameSegment is json_segment_cmp: same type; crypt ones also the same
// sector size and cipher.
func sameSegment(a, b *node) bool {
	ta, tb := a.get("type"), b.get("type")
	if ta == nil || tb == nil || cstr(ta.str) != cstr(tb.str) {
		return false
	}
	if cstr(ta.str) != "crypt" {
		return true
	}
	return intOf(a.get("sector_size")) == intOf(b.get("sector_size")) && jsonText(a.get("encryption")) == jsonText(b.get("encryption"))
}

// requirement classifies a mandatory requirement as cryptsetup knows it.
func isOnlineReencrypt(r string) bool {
	return r == "online-reencrypt" || r == "online-reencrypt-v2" || r == "online-reencrypt-v3"
}

// requires reports whether a mandatory requirement satisfies match.
func requires(root *node, match func(string) bool) bool {
	mand := root.get("config").get("requirements").get("mandatory")
	if mand == nil {
		return false
	}
	for _, r := range mand.vals {
		if match(jsonText(r)) {
			return true
		}
	}
	return false
}

// validateKeyslotTypes is LUKS2_keyslots_validate: keyslots of a type
// cryptsetup knows pass its own checks, a luks2 keyslot has exactly one
// digest, and a reencrypt keyslot goes with the reencryption requirement.
func validateKeyslotTypes(root *node) error {
	keyslots, digests := root.get("keyslots"), root.get("digests")
	reencrypt := 0
	for i, key := range keyslots.keys {
		k := keyslots.vals[i]
		switch jsonText(k.get("type")) {
		case "luks2":
			if err := validateLUKS2Keyslot(k); err != nil {
				return fmt.Errorf("keyslot %s: %w", key, err)
			}
			n := 0
			for _, d := range digests.vals {
				if arrayHolds(d.get("keyslots"), strconv.Itoa(atoi(key))) {
					n++
				}
			}
			if n != 1 {
				return invalid("keyslot %s is assigned to %d digests", key, n)
			}
		case "reencrypt":
			if err := validateReencryptKeyslot(k); err != nil {
				return fmt.Errorf("keyslot %s: %w", key, err)
			}
			reencrypt++
		}
	}
	switch {
	case requires(root, isOnlineReencrypt) && reencrypt == 0:
		return invalid("no reencryption keyslot")
	case reencrypt > 0 && !requires(root, reencryptFlag):
		return invalid("a reencryption keyslot without the requirement")
	case reencrypt > 1:
		return invalid("more than one reencryption keyslot")
	}
	return nil
}

// validateLUKS2Keyslot is luks2_keyslot_validate.
func validateLUKS2Keyslot(k *node) error {
	kdf, af, area := contains(k, "kdf", kindObject), contains(k, "af", kindObject), contains(k, "area", kindObject)
	if kdf == nil || af == nil || area == nil {
		return invalid("no kdf, af or area object")
	}
	typ := containsString(kdf, "type")
	if typ == nil {
		return invalid("kdf has no type")
	}
	switch cstr(typ.str) {
	case "pbkdf2":
		if len(kdf.keys) != 4 || containsString(kdf, "hash") == nil || containsInt(kdf, "iterations") == nil || containsString(kdf, "salt") == nil {
			return invalid("malformed pbkdf2 kdf")
		}
	case "argon2i", "argon2id":
		if len(kdf.keys) != 5 || containsInt(kdf, "time") == nil || containsInt(kdf, "memory") == nil ||
			containsInt(kdf, "cpus") == nil || containsString(kdf, "salt") == nil {
			return invalid("malformed argon2 kdf")
		}
	}
	if t := containsString(af, "type"); t == nil || cstr(t.str) != "luks1" ||
		containsString(af, "hash") == nil || containsInt(af, "stripes") == nil {
		return invalid("malformed af")
	}
	if t := containsString(area, "type"); t == nil || cstr(t.str) != "raw" ||
		containsString(area, "encryption") == nil || containsInt(area, "key_size") == nil ||
		containsString(area, "offset") == nil || containsString(area, "size") == nil {
		return invalid("malformed area")
	}
	return nil
}

// validateReencryptKeyslot is reenc_keyslot_validate.
func validateReencryptKeyslot(k *node) error {
	area := k.get("area")
	if area == nil || area.get("type") == nil {
		return invalid("reencrypt keyslot has no area type")
	}
	ks := containsInt(k, "key_size")
	mode, dir := containsString(k, "mode"), containsString(k, "direction")
	if ks == nil || mode == nil || dir == nil || !isUint32(ks) || int64Of(ks) != 1 {
		return invalid("malformed reencrypt keyslot")
	}
	switch cstr(mode.str) {
	case "reencrypt", "encrypt", "decrypt":
	default:
		return invalid("reencrypt mode %q", mode.str)
	}
	if d := cstr(dir.str); d != "forward" && d != "backward" {
		return invalid("reencrypt direction %q", d)
	}
	switch typ := jsonText(area.get("type")); typ {
	case "checksum", "datashift-checksum":
		hash, sector := containsString(area, "hash"), containsInt(area, "sector_size")
		if hash == nil || sector == nil || !isUint32(sector) {
			return invalid("malformed checksum area")
		}
		if s := int64Of(sector); s < 512 || s&(s-1) != 0 {
			return invalid("checksum sector size %d", s)
		}
	case "datashift", "datashift-journal":
		shift := containsString(area, "shift_size")
		if shift == nil {
			return invalid("datashift area without shift_size")
		}
		if s, _ := strToUint64(shift.str); s == 0 || s%512 != 0 {
			return invalid("datashift shift_size %d", s)
		}
	}
	return nil
}

// repairKeyslots is LUKS2_keyslots_repair: a luks2 keyslot's kdf keeps
// only the fields of its type.
func repairKeyslots(root *node) {
	keyslots := root.get("keyslots")
	if keyslots == nil || keyslots.kind != kindObject {
		return
	}
	for _, k := range keyslots.vals {
		if k.kind != kindObject || jsonText(k.get("type")) != "luks2" || k.get("type").kind != kindString {
			continue
		}
		kdf := k.get("kdf")
		if kdf == nil || kdf.kind != kindObject || kdf.get("type") == nil || kdf.get("type").kind != kindString {
			continue
		}
		var keep []string
		switch cstr(kdf.get("type").str) {
		case "pbkdf2":
			keep = []string{"type", "salt", "hash", "iterations"}
		case "argon2i", "argon2id":
			keep = []string{"type", "salt", "time", "memory", "cpus"}
		default:
			continue
		}
		for _, key := range append([]string(nil), kdf.keys...) {
			if !slicesContains(keep, key) {
				kdf.del(key)
			}
		}
	}
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
