package luks2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// header is a loaded LUKS2 header: both copies' binary fields and the
// chosen metadata.
type header struct {
	bin   binHeader // fields of the copy in use
	salt2 [saltLen]byte
	meta  *metadata
	// fresh: being formatted; nothing on the device is this header yet.
	fresh bool
	// damaged names the copy ("primary", "secondary") that was not good
	// when read; goodArea is the other's JSON area as read, to repair it.
	damaged  string
	goodArea []byte
}

// activatable refuses a data segment luksd must not map: requirements it
// cannot meet (reencryption in progress above all), segments that are not
// crypt, unsafe ciphers, sector sizes dm-crypt does not take.
func (h *header) activatable() error {
	if err := requirementsError(h.meta.mandatory); errors.Is(err, ErrReencryption) {
		return fmt.Errorf("%w: the volume is in reencryption; finish it with luksd reencrypt --resume-only (or cryptsetup)", ErrUnsupported)
	} else if err != nil {
		return err
	}
	for _, id := range sortedIDs(h.meta.segments) {
		s := h.meta.segments[id]
		if s.typ != "crypt" {
			return fmt.Errorf("%w: segment %d has type %q", ErrUnsupported, id, s.typ)
		}
		if err := safeCipher(s.cipher); err != nil {
			return fmt.Errorf("%w: segment %d: %v", ErrUnsupported, id, err)
		}
		if !ValidSectorSize(2, s.sectorSize) {
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

func (h *header) version() int { return 2 }

func (h *header) uuid() string { return h.bin.uuid }

func (h *header) segment() (Segment, error) {
	if err := h.activatable(); err != nil {
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
// keyslots record it; 0 when it has none.
func (h *header) segmentKeySize() int {
	s, err := h.meta.dataSegment()
	if err != nil {
		return 0
	}
	d := h.meta.segmentDigest(s.id)
	if d == nil {
		return 0
	}
	if len(d.keyslots) == 0 {
		return 0
	}
	return h.meta.keyslots[d.keyslots[0]].keySize
}

func (h *header) activeKeyslots() []int { return sortedIDs(h.meta.keyslots) }

func (h *header) headerSize() int64 { return 2*h.bin.hdrSize + int64(h.meta.keyslotsSize) }

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
	h.fresh, h.damaged = false, ""
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
// volume or none). A primary that was damaged when h was read through the
// secondary (a write torn by a crash: cryptsetup repairs it as it loads)
// is another editor's only once it is whole again with a newer seqid.
func (h *header) unchanged(dev io.ReaderAt) error {
	var b [512]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil {
		return fmt.Errorf("reading LUKS2 header: %w", err)
	}
	if !bytes.Equal(b[:magicLen], magic1) || binary.BigEndian.Uint16(b[offVersion:]) != 2 ||
		cString(b[offUUID:offUUID+uuidLen]) != h.bin.uuid {
		return nil
	}
	seqID := binary.BigEndian.Uint64(b[offSeqID:])
	if h.damaged == "primary" && (seqID < h.bin.seqID || !loadCopy(dev, 0, false).good()) {
		return nil
	}
	if seqID != h.bin.seqID {
		return ErrConcurrentUpdate
	}
	return nil
}

// areaGap finds the lowest free, 4096-aligned range of size bytes in the
// keyslots area, clear of every keyslot's area (those cryptsetup does not
// address by number too).
func (h *header) areaGap(size uint64) (uint64, error) {
	start := uint64(2 * h.bin.hdrSize)
	end := start + h.meta.keyslotsSize
	used := append([]interval(nil), h.meta.areas...)
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	off := start
	for _, u := range used {
		if u.len == 0 {
			continue
		}
		if u.off >= off+size {
			break
		}
		if u.off+u.len > off {
			off = (u.off + u.len + keyslotsAlign - 1) / keyslotsAlign * keyslotsAlign
		}
	}
	if off+size > end {
		return 0, ErrNoKeyslotSpace
	}
	return off, nil
}
