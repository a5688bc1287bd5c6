package luks2

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// header is a loaded LUKS2 header (both copies' binary fields and the
// chosen metadata) or a LUKS1 one (v1 set).
type header struct {
	v1 *luks1Header

	bin   binHeader // fields of the copy in use
	salt2 [saltLen]byte
	meta  *metadata
	// fresh: being formatted; nothing on the device is this header yet.
	fresh bool
}

// isLUKS reports whether dev starts with a LUKS magic and version 1 or 2.
func isLUKS(dev io.ReaderAt) bool {
	var b [8]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil {
		return false
	}
	if !bytes.Equal(b[:magicLen], magic1) {
		return false
	}
	v := binary.BigEndian.Uint16(b[offVersion:])
	return v == 1 || v == 2
}

// copyResult is one header copy that passed its binary checks.
type copyResult struct {
	bin  *binHeader
	meta *metadata
	err  error
}

func loadCopy(dev io.ReaderAt, offset int64, secondary bool) copyResult {
	bh, area, err := readCopy(dev, offset, secondary)
	if err != nil {
		return copyResult{err: err}
	}
	root, err := parseJSON(area)
	if err != nil {
		return copyResult{err: err}
	}
	m, err := parseMetadata(root, bh.hdrSize)
	if err != nil {
		return copyResult{err: err}
	}
	return copyResult{bin: bh, meta: m}
}

func readHeader(dev io.ReaderAt, size int64) (*Header, error) {
	var b [8]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotLUKS, err)
	}
	if bytes.Equal(b[:magicLen], magic1) && binary.BigEndian.Uint16(b[offVersion:]) == 1 {
		h1, err := readLUKS1(dev, size)
		if err != nil {
			return nil, err
		}
		return &Header{impl: &header{v1: h1}}, nil
	}
	primary := loadCopy(dev, 0, false)
	var secondary copyResult
	if primary.err == nil {
		secondary = loadCopy(dev, primary.bin.hdrSize, true)
	} else {
		secondary = copyResult{err: errors.New("no secondary LUKS2 header")}
		for _, off := range hdrSizes {
			if size > 0 && off+binHeaderSize > size {
				break
			}
			if c := loadCopy(dev, off, true); c.err == nil {
				secondary = c
				break
			}
		}
	}
	h := &header{}
	switch {
	case primary.err == nil && (secondary.err != nil || primary.bin.seqID >= secondary.bin.seqID):
		h.bin, h.meta = *primary.bin, primary.meta
		if secondary.err == nil {
			h.salt2 = secondary.bin.salt
		} else if _, err := rand.Read(h.salt2[:]); err != nil {
			return nil, err
		}
	case secondary.err == nil:
		h.bin, h.meta = *secondary.bin, secondary.meta
		h.salt2 = secondary.bin.salt
		if primary.err == nil {
			h.bin.salt = primary.bin.salt
		} else if _, err := rand.Read(h.bin.salt[:]); err != nil {
			return nil, err
		}
		h.bin.hdrOffset = 0
	default:
		if !bytes.Equal(b[:magicLen], magic1) && !strings.Contains(secondary.err.Error(), "magic") {
			return nil, fmt.Errorf("%w: primary header: %v; secondary header: %v", ErrNotLUKS, primary.err, secondary.err)
		}
		if !bytes.Equal(b[:magicLen], magic1) {
			return nil, ErrNotLUKS
		}
		return nil, fmt.Errorf("%w: %v", ErrNotLUKS, primary.err)
	}
	return &Header{impl: h}, nil
}

// usable refuses headers luksd must not unlock or edit.
func (h *header) usable() error {
	if h.v1 != nil {
		return h.v1.usable()
	}
	m := h.meta
	for _, r := range m.mandatory {
		if strings.HasPrefix(r, "online-reencrypt") {
			return fmt.Errorf("%w: the volume is in reencryption (requirement %q); finish it with cryptsetup", ErrUnsupported, r)
		}
		return fmt.Errorf("%w: unknown mandatory requirement %q", ErrUnsupported, r)
	}
	for _, id := range sortedIDs(m.keyslots) {
		k := m.keyslots[id]
		if k.typ != "luks2" {
			continue
		}
		if err := safeCipher(k.areaCipher); err != nil {
			return fmt.Errorf("%w: keyslot %d: %v", ErrUnsupported, id, err)
		}
	}
	for _, id := range sortedIDs(m.segments) {
		s := m.segments[id]
		if s.typ != "crypt" {
			return fmt.Errorf("%w: segment %d has type %q", ErrUnsupported, id, s.typ)
		}
		if err := safeCipher(s.cipher); err != nil {
			return fmt.Errorf("%w: segment %d: %v", ErrUnsupported, id, err)
		}
		if s.sectorSize < 512 || s.sectorSize > 4096 || s.sectorSize&(s.sectorSize-1) != 0 {
			return fmt.Errorf("%w: segment %d sector size %d (dm-crypt needs a power of two 512..4096)", ErrUnsupported, id, s.sectorSize)
		}
	}
	return nil
}

// safeCipher refuses cipher_null and ECB (CVE-2025-59054): such a keyslot
// or segment stores keys or data in the clear.
func safeCipher(spec string) error {
	l := strings.ToLower(spec)
	if c, ok := strings.CutPrefix(l, "capi:"); ok {
		if strings.HasPrefix(c, "ecb(") || strings.Contains(c, "cipher_null") {
			return fmt.Errorf("cipher %q is not secure (null or ECB)", spec)
		}
		return nil
	}
	parts := strings.Split(l, "-")
	if parts[0] == "cipher_null" || parts[0] == "null" || len(parts) > 1 && (parts[1] == "ecb" || parts[1] == "null") || len(parts) == 1 {
		return fmt.Errorf("cipher %q is not secure (null or ECB)", spec)
	}
	return nil
}

func (h *header) version() int {
	if h.v1 != nil {
		return 1
	}
	return 2
}

func (h *header) uuid() string {
	if h.v1 != nil {
		return h.v1.uuid
	}
	return h.bin.uuid
}

func (h *header) label() string {
	if h.v1 != nil {
		return ""
	}
	return h.bin.label
}

func (h *header) subsystem() string {
	if h.v1 != nil {
		return ""
	}
	return h.bin.subsystem
}

func (h *header) segment() (Segment, error) {
	if h.v1 != nil {
		return h.v1.segment()
	}
	if err := h.usable(); err != nil {
		return Segment{}, err
	}
	s, err := h.meta.dataSegment()
	if err != nil {
		return Segment{}, err
	}
	keySize := h.segmentKeySize()
	if s.ivTweak != 0 {
		return Segment{}, fmt.Errorf("%w: segment iv_tweak %d", ErrUnsupported, s.ivTweak)
	}
	if _, err := dmcrypt.ParseSpec(s.cipher); err != nil {
		return Segment{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return Segment{Offset: int64(s.offset), Size: int64(s.size), Cipher: s.cipher, SectorSize: s.sectorSize, KeySize: keySize}, nil
}

// segmentKeySize is the volume key size of the data segment, as its
// keyslots record it; 0 when it has none (or is not LUKS2).
func (h *header) segmentKeySize() int {
	if h.meta == nil {
		return 0
	}
	s, err := h.meta.dataSegment()
	if err != nil {
		return 0
	}
	d := h.meta.segmentDigest(s.id)
	if d == nil {
		return 0
	}
	for _, k := range d.keyslots {
		return h.meta.keyslots[k].keySize
	}
	return 0
}

func (h *header) flags() []string {
	if h.v1 != nil {
		return nil
	}
	return append([]string(nil), h.meta.flags...)
}

func (h *header) activeKeyslots() []int {
	if h.v1 != nil {
		return h.v1.activeKeyslots()
	}
	return sortedIDs(h.meta.keyslots)
}

func (h *header) headerSize() int64 {
	if h.v1 != nil {
		return h.v1.headerSize()
	}
	return 2*h.bin.hdrSize + int64(h.meta.keyslotsSize)
}

func (h *header) json() []byte {
	if h.v1 != nil {
		return nil
	}
	return h.meta.root.pretty()
}

// write stores the metadata in both copies with a new seqid, as cryptsetup
// does, in an order that a power cut tears at most one copy of: whatever
// was written before (key material, wipes) is flushed first, then the
// primary (binary header without checksum, JSON area, binary header with
// checksum) is written and flushed, then the secondary likewise. It
// refuses to write over a header another editor changed since it was read.
func (h *header) write(dev Device) error {
	jsonSize := h.bin.hdrSize - binHeaderSize
	js := h.meta.root.compact()
	if int64(len(js)) >= jsonSize {
		return fmt.Errorf("LUKS2 metadata (%d bytes) does not fit the %d-byte JSON area", len(js), jsonSize)
	}
	area := make([]byte, jsonSize)
	copy(area, js)
	if !h.fresh {
		if err := h.unchanged(dev); err != nil {
			return err
		}
	}
	if err := flush(dev); err != nil {
		return err
	}
	h.bin.seqID++
	for i, off := range []int64{0, h.bin.hdrSize} {
		bh := h.bin
		bh.hdrOffset = off
		if i == 1 {
			bh.salt = h.salt2
		}
		if err := writeCopy(dev, &bh, i == 1, area); err != nil {
			return err
		}
		if err := flush(dev); err != nil {
			return err
		}
	}
	h.fresh = false
	return nil
}

// writeCopy writes one header copy as cryptsetup does: the binary header
// without its checksum, the JSON area, then the binary header with it.
func writeCopy(dev io.WriterAt, bh *binHeader, secondary bool, area []byte) error {
	raw, err := bh.encode(secondary, area)
	if err != nil {
		return err
	}
	noSum := append([]byte(nil), raw...)
	clear(noSum[offCsum : offCsum+csumLen])
	if _, err := dev.WriteAt(noSum, bh.hdrOffset); err != nil {
		return fmt.Errorf("writing LUKS2 header: %w", err)
	}
	if _, err := dev.WriteAt(area, bh.hdrOffset+binHeaderSize); err != nil {
		return fmt.Errorf("writing LUKS2 metadata: %w", err)
	}
	if _, err := dev.WriteAt(raw, bh.hdrOffset); err != nil {
		return fmt.Errorf("writing LUKS2 header: %w", err)
	}
	return nil
}

// flush makes what was written to dev durable.
func flush(dev Device) error {
	if err := dev.Flush(); err != nil {
		return fmt.Errorf("flushing the header device: %w", err)
	}
	return nil
}

// unchanged refuses an edit when the header on dev is no longer the one h
// was read from: LUKS2, a primary header of this volume with another seqid
// (cryptsetup's LUKS2_check_sequence_id, which skips a primary of another
// volume or none); LUKS1, a header whose bytes changed.
func (h *header) unchanged(dev io.ReaderAt) error {
	if h.v1 != nil {
		return h.v1.unchanged(dev)
	}
	var b [512]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil {
		return fmt.Errorf("reading LUKS2 header: %w", err)
	}
	if !bytes.Equal(b[:magicLen], magic1) || binary.BigEndian.Uint16(b[offVersion:]) != 2 ||
		cString(b[offUUID:offUUID+uuidLen]) != h.bin.uuid {
		return nil
	}
	if binary.BigEndian.Uint64(b[offSeqID:]) != h.bin.seqID {
		return ErrConcurrentUpdate
	}
	return nil
}

// areaGap finds the lowest free, 4096-aligned range of size bytes in the
// keyslots area.
func (h *header) areaGap(size uint64) (uint64, error) {
	start := uint64(2 * h.bin.hdrSize)
	end := start + h.meta.keyslotsSize
	type iv struct{ off, end uint64 }
	var used []iv
	for _, k := range h.meta.keyslots {
		if k.areaSize > 0 {
			used = append(used, iv{k.areaOffset, k.areaOffset + k.areaSize})
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	off := start
	for _, u := range used {
		if u.off >= off+size {
			break
		}
		if u.end > off {
			off = (u.end + keyslotsAlign - 1) / keyslotsAlign * keyslotsAlign
		}
	}
	if off+size > end {
		return 0, errors.New("not enough space in the keyslots area for a new keyslot")
	}
	return off, nil
}
