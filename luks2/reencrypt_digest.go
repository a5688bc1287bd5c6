package luks2

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// The reencryption digest (cryptsetup's fix for CVE-2021-4122): a pbkdf2
// digest, bound to the reencrypt keyslot, over "v" and '0'+version, the old
// and the new volume key, and a serialization of the reencrypt keyslot's
// parameters and the backup segments. Whoever cannot unlock the volume keys
// cannot forge reencryption metadata that cryptsetup or luksd would resume.

// reencryptVersion is the version of the online-reencrypt-vN requirement
// cryptsetup 2.6.1 writes for reencrypt mode.
const reencryptVersion = 2

// reencryptVerificationData assembles the digested data from the JSON tree
// root (the metadata about to be written or as read), oldVK and newVK.
func reencryptVerificationData(root *node, version int, oldVK, newVK []byte) ([]byte, error) {
	data := []byte{'v', byte('0' + version)}
	data = append(data, oldVK...)
	data = append(data, newVK...)
	ks := reencryptKeyslotNode(root)
	if ks == nil {
		return nil, fmt.Errorf("%w: no reencrypt keyslot", ErrUnsupported)
	}
	area := ks.get("area")
	fields := []serialField{{ks, "mode", sString}, {ks, "direction", sString},
		{area, "type", sString}, {area, "offset", sUint64}, {area, "size", sUint64}}
	switch area.get("type").str {
	case "checksum":
		fields = append(fields, serialField{area, "hash", sString}, serialField{area, "sector_size", sUint32})
	case "datashift", "datashift-journal":
		fields = append(fields, serialField{area, "shift_size", sUint64})
	case "datashift-checksum":
		fields = append(fields, serialField{area, "hash", sString}, serialField{area, "sector_size", sUint32},
			serialField{area, "shift_size", sUint64})
	}
	var ok bool
	if data, ok = serialize(data, fields); !ok {
		return nil, fmt.Errorf("%w: reencrypt keyslot parameters are malformed", ErrUnsupported)
	}
	for _, flag := range []string{"backup-previous", "backup-final", "backup-moved-segment"} {
		seg := segmentByFlag(root, flag)
		if seg == nil {
			if flag == "backup-moved-segment" {
				continue
			}
			return nil, fmt.Errorf("%w: no %s segment", ErrUnsupported, flag)
		}
		if data, ok = serializeSegment(data, seg); !ok {
			return nil, fmt.Errorf("%w: %s segment is malformed", ErrUnsupported, flag)
		}
	}
	return data, nil
}

type serialKind int

const (
	sString serialKind = iota // the string's bytes (at most 64)
	sUint64                   // a decimal string, as 8 big-endian bytes
	sSize                     // sUint64, or the word "dynamic"
	sUint32                   // a JSON integer, as 4 big-endian bytes
)

type serialField struct {
	o    *node
	key  string
	kind serialKind
}

// serialize appends the fields as cryptsetup serializes them; false when
// one is missing or of the wrong JSON type.
func serialize(data []byte, fields []serialField) ([]byte, bool) {
	for _, f := range fields {
		v := f.o.get(f.key)
		if v == nil {
			return nil, false
		}
		switch f.kind {
		case sString:
			if v.kind != kindString || len(v.str) == 0 || len(v.str) > 64 {
				return nil, false
			}
			data = append(data, v.str...)
		case sSize, sUint64:
			if v.kind != kindString {
				return nil, false
			}
			if f.kind == sSize && v.str == "dynamic" {
				data = append(data, v.str...)
				break
			}
			u, _ := strToUint64(v.str)
			data = binary.BigEndian.AppendUint64(data, u)
		case sUint32:
			if !v.isInt() {
				return nil, false
			}
			data = binary.BigEndian.AppendUint32(data, uint32(int64Of(v)))
		}
	}
	return data, true
}

func serializeSegment(data []byte, seg *node) ([]byte, bool) {
	fields := []serialField{{seg, "type", sString}, {seg, "offset", sUint64}, {seg, "size", sSize}}
	switch seg.get("type").str {
	case "crypt":
		fields = append(fields, serialField{seg, "iv_tweak", sUint64}, serialField{seg, "encryption", sString},
			serialField{seg, "sector_size", sUint32})
	case "linear":
	default:
		return nil, false
	}
	return serialize(data, fields)
}

// reencryptKeyslotNode is the first keyslot of type "reencrypt", or nil.
func reencryptKeyslotNode(root *node) *node {
	ks := root.get("keyslots")
	for i, k := range ks.keys {
		if _, ok := addressable(k); ok && ks.vals[i].get("type").str == "reencrypt" {
			return ks.vals[i]
		}
	}
	return nil
}

// segmentByFlag is the segment carrying flag, or nil.
func segmentByFlag(root *node, flag string) *node {
	for _, s := range root.get("segments").vals {
		if segmentFlag(s, flag, false) {
			return s
		}
	}
	return nil
}

// reencryptVersionOf reads N of the online-reencrypt-vN requirement.
func reencryptVersionOf(mandatory []string) (int, bool) {
	for _, r := range mandatory {
		if v, ok := strings.CutPrefix(r, "online-reencrypt-v"); ok && len(v) == 1 && v[0] >= '2' && v[0] <= '9' {
			return int(v[0] - '0'), true
		}
	}
	return 0, false
}
