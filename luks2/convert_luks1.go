package luks2

import (
	"bytes"
	"encoding/binary"
	"sort"
	"strings"
)

// toLUKS1 is cryptsetup 2.6.1's LUKS2_luks2_to_luks1: a LUKS2 header that
// LUKS1 can describe (one 512-byte-sector segment, one PBKDF2 digest, no
// tokens, keyslots 0-7 only, each PBKDF2 with the digest's hash, 4000
// stripes and the segment's cipher) becomes a LUKS1 header whose keyslots
// are the LUKS2 ones moved back by convertShift.
func (h *header) toLUKS1(dev Device, size int64, opts ConvertOptions) error {
	m := h.meta
	dg := m.digests[0]
	seg, err := m.dataSegment()
	if dg == nil || err != nil {
		return refuse("")
	}
	if seg.sectorSize != 512 {
		return refuse("Cannot convert to LUKS1 format - default segment encryption sector size is not 512 bytes.")
	}
	if dg.typ != "pbkdf2" || len(m.root.get("digests").keys) != 1 {
		return refuse("Cannot convert to LUKS1 format - key slot digests are not LUKS1 compatible.")
	}
	name, mode, ok := splitCipher(seg.cipher)
	if !ok {
		return refuse("")
	}
	if strings.HasPrefix(name, "paes") {
		return refuse("Cannot convert to LUKS1 format - device uses wrapped key cipher %s.", name)
	}
	if len(m.root.get("segments").keys) != 1 {
		return refuse("Cannot convert to LUKS1 format - device uses more segments.")
	}
	if n := len(m.root.get("tokens").keys); n > 0 {
		return refuse("Cannot convert to LUKS1 format - LUKS2 header contains %d token(s).", n)
	}
	keySize := h.segmentKeySize()
	if keySize <= 0 {
		return refuse("")
	}
	for i := range maxKeyslots {
		k := m.keyslots[i]
		if k == nil {
			continue
		}
		if i >= luks1NumKeys {
			return refuse("Cannot convert to LUKS1 format - slot %d (over maximum slots) is still active.", i)
		}
		if !h.luks1Compatible(k, keySize, dg.hash, seg.cipher) {
			return refuse("Cannot convert to LUKS1 format - keyslot %d is not LUKS1 compatible.", i)
		}
	}
	h1, err := h.luks1Header(keySize, dg, seg, name, mode)
	if err != nil {
		return err
	}
	raw := h1.encode()
	// cryptsetup finds out only when it reads back what it wrote; luksd
	// refuses before writing.
	if _, err := readLUKS1(bytes.NewReader(raw), 0); err != nil {
		return refuse("")
	}
	if opts.InUse != nil && opts.InUse(h.bin.uuid, "LUKS2") {
		return ErrConvertInUse
	}
	// cryptsetup checks the size (growing an image file) only when it
	// writes the LUKS1 header, after the move; luksd before.
	if end := int64(h1.keyAreaEnd()) * 512; size > 0 && end > size && !fallocate(dev, end) {
		return &LUKS1TooSmallError{Need: end}
	}
	if err := h.unchanged(dev); err != nil {
		return err
	}
	if err := moveArea(dev, 2*hdrSize16K, luks1AlignKeyslots, int64(m.keyslotsSize)); err != nil {
		return err
	}
	// The LUKS2 primary binary header goes, then the LUKS1 header is
	// written over it.
	if err := zeroRange(dev, 0, luks1AlignKeyslots); err != nil {
		return err
	}
	if err := flush(dev); err != nil {
		return err
	}
	out := make([]byte, luks1HeaderWrite)
	copy(out, raw)
	if _, err := dev.WriteAt(out, 0); err != nil {
		return err
	}
	return flush(dev)
}

// splitCipher splits a dm-crypt spec as crypt_parse_name_and_mode does:
// "aes-xts-plain64" is "aes" and "xts-plain64"; a lone name has mode "".
func splitCipher(spec string) (name, mode string, ok bool) {
	if strings.HasPrefix(spec, "capi:") || len(spec) == 0 {
		return "", "", false
	}
	name, mode, _ = strings.Cut(spec, "-")
	return name, mode, len(name) < 32 && len(mode) < 32
}

// luks1Compatible is keyslot_LUKS1_compatible.
func (h *header) luks1Compatible(k *keyslot, keySize int, hash, cipher string) bool {
	if k.typ != "luks2" || k.kdf.typ != "pbkdf2" || k.kdf.hash != hash {
		return false
	}
	if k.stripes != luks1Stripes || k.afHash != hash {
		return false
	}
	if _, err := hashFunc(hash); err != nil {
		return false
	}
	if k.areaCipher != cipher || k.areaKeySize != keySize {
		return false
	}
	return k.areaSize == uint64(roundUp(int64(luks1AFSectors(uint32(keySize)))*512, 4096))
}

// luks1Header builds the LUKS1 header of a compatible LUKS2 one: keyslots
// at their LUKS2 offsets less convertShift, free ones where cryptsetup
// places them (the first gap of a keyslot's size, taken in turn).
func (h *header) luks1Header(keySize int, dg *digest, seg *segment, name, mode string) (*luks1Header, error) {
	m := h.meta
	h1 := &luks1Header{cipherName: name, cipherMode: mode, payloadOffset: uint32(seg.offset / 512),
		keyBytes: uint32(keySize), mkDigestIter: uint32(dg.iterations), uuidText: h.bin.uuid}
	if seg.offset/512 > 1<<32-1 || len(dg.digest) < luks1DigestSize || len(dg.salt) != luks1SaltSize {
		return nil, refuse("")
	}
	copy(h1.mkDigest[:], dg.digest)
	copy(h1.mkDigestSalt[:], dg.salt)
	areas := map[int]interval{}
	for id, k := range m.keyslots {
		areas[id] = interval{k.areaOffset, k.areaSize}
	}
	var last *keyslot
	for i := range luks1NumKeys {
		s := &h1.slots[i]
		s.active, s.stripes = luks1KeyDisabled, luks1Stripes
		k := m.keyslots[i]
		off := uint64(0)
		if k != nil {
			off = k.areaOffset
		} else {
			gap, ok := h.areaGapLUKS1(areas, keySize)
			if !ok {
				return nil, refuse("")
			}
			off = gap
			areas[i] = interval{gap, keyslotAreaSize(keySize)}
		}
		if off/512 > 1<<32-1 || off < convertShift {
			return nil, refuse("")
		}
		s.offset = uint32(off/512) - convertShift/512
		if k == nil {
			continue
		}
		last = k
		s.active = luks1KeyEnabled
		s.iterations = uint32(k.kdf.iterations)
		if len(k.kdf.salt) == luks1SaltSize {
			copy(s.salt[:], k.kdf.salt)
		}
	}
	if last == nil {
		return nil, refuse("")
	}
	h1.hashSpec = last.kdf.hash
	// The name fields are NUL-terminated in 32 bytes.
	h1.cipherName, h1.cipherMode = name, mode
	return h1, h1.fillRaw()
}

// areaGapLUKS1 is LUKS2_find_area_gap over keyslots 0-31 and the
// placeholders taken so far: the first place of a keySize keyslot's area
// size after the header copies.
func (h *header) areaGapLUKS1(areas map[int]interval, keySize int) (uint64, bool) {
	var sorted []interval
	for _, a := range areas {
		if a.off != 0 && a.len != 0 {
			sorted = append(sorted, a)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].off < sorted[j].off })
	off := uint64(2 * h.bin.hdrSize)
	length := keyslotAreaSize(keySize)
	for _, a := range sorted {
		if off < a.off && off+length <= a.off {
			break
		}
		off = a.off + a.len
	}
	end := uint64(2*h.bin.hdrSize) + h.meta.keyslotsSize
	return off, off+length <= end
}

// fillRaw encodes a new header's fixed fields into raw (keyslots and UUID
// are patched in by encode).
func (h *luks1Header) fillRaw() error {
	var raw [luks1HeaderSize]byte
	copy(raw[:], magic1)
	binary.BigEndian.PutUint16(raw[offVersion:], 1)
	for _, f := range []struct {
		off int
		s   string
	}{{8, h.cipherName}, {40, h.cipherMode}, {72, h.hashSpec}} {
		if len(f.s) > 31 {
			return refuse("")
		}
		copy(raw[f.off:f.off+32], f.s)
	}
	binary.BigEndian.PutUint32(raw[104:], h.payloadOffset)
	binary.BigEndian.PutUint32(raw[108:], h.keyBytes)
	copy(raw[112:132], h.mkDigest[:])
	copy(raw[132:164], h.mkDigestSalt[:])
	binary.BigEndian.PutUint32(raw[164:], h.mkDigestIter)
	h.raw = raw
	return nil
}
