package luks2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
)

// The LUKS2 binary header: 4096 bytes in front of each JSON area.
const (
	binHeaderSize = 4096
	magicLen      = 6
	uuidLen       = 40
	labelLen      = 48
	saltLen       = 64
	csumAlgLen    = 32
	csumLen       = 64

	offVersion   = 6
	offHdrSize   = 8
	offSeqID     = 16
	offLabel     = 24
	offCsumAlg   = 72
	offSalt      = 104
	offUUID      = 168
	offSubsystem = 208
	offHdrOffset = 256
	offCsum      = 448
)

var (
	magic1 = []byte("LUKS\xba\xbe")
	magic2 = []byte("SKUL\xba\xbe")
)

// hdrSizes are the allowed hdr_size values (binary header + JSON area); the
// secondary header sits at one of them.
var hdrSizes = []int64{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}

func validHdrSize(n int64) bool {
	for _, s := range hdrSizes {
		if s == n {
			return true
		}
	}
	return false
}

// binHeader is the decoded binary header of one copy.
type binHeader struct {
	hdrSize   int64
	seqID     uint64
	label     string
	csumAlg   string
	salt      [saltLen]byte
	uuid      string
	subsystem string
	hdrOffset int64
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// csumHash returns a new hash for a header's checksum_alg.
func csumHash(alg string) (hash.Hash, error) {
	h, err := hashFunc(alg)
	if err != nil {
		return nil, fmt.Errorf("unsupported header checksum algorithm %q", alg)
	}
	return h(), nil
}

// maxHdrSize is LUKS2_HDR_OFFSET_MAX, the largest hdr_size read.
const maxHdrSize = 4 << 20

// readCopy reads and checks the header copy at offset as cryptsetup's
// hdr_read_disk does: magic, version 2, hdr_offset, hdr_size between 16 KiB
// and 4 MiB (a secondary's equal to its offset), checksum. It returns the
// decoded binary header and the JSON area; the area itself is judged by
// the caller.
func readCopy(dev io.ReaderAt, offset int64, secondary bool) (*binHeader, []byte, error) {
	raw := make([]byte, binHeaderSize)
	if _, err := dev.ReadAt(raw, offset); err != nil {
		return nil, nil, fmt.Errorf("reading header at %d: %w", offset, err)
	}
	want := magic1
	if secondary {
		want = magic2
	}
	if !bytes.Equal(raw[:magicLen], want) {
		return nil, nil, fmt.Errorf("no LUKS2 header magic at offset %d", offset)
	}
	if v := binary.BigEndian.Uint16(raw[offVersion:]); v != 2 {
		return nil, nil, fmt.Errorf("unsupported LUKS version %d at offset %d", v, offset)
	}
	bh := &binHeader{
		hdrSize: int64(binary.BigEndian.Uint64(raw[offHdrSize:])),
		seqID:   binary.BigEndian.Uint64(raw[offSeqID:]),
		// Cut as cryptsetup's hdr_from_disk cuts them: one byte short of
		// their fields, for the NUL.
		label:     cString(raw[offLabel : offLabel+labelLen-1]),
		csumAlg:   cString(raw[offCsumAlg : offCsumAlg+csumAlgLen]),
		uuid:      cString(raw[offUUID : offUUID+uuidLen-1]),
		subsystem: cString(raw[offSubsystem : offSubsystem+labelLen-1]),
		hdrOffset: int64(binary.BigEndian.Uint64(raw[offHdrOffset:])),
	}
	copy(bh.salt[:], raw[offSalt:])
	if bh.hdrOffset != offset {
		return nil, nil, fmt.Errorf("header at offset %d claims offset %d", offset, bh.hdrOffset)
	}
	if bh.hdrSize < hdrSizes[0] || bh.hdrSize > maxHdrSize || secondary && bh.hdrSize != offset {
		return nil, nil, fmt.Errorf("invalid header size %d at offset %d", bh.hdrSize, offset)
	}
	h, err := csumHash(bh.csumAlg)
	if err != nil {
		return nil, nil, err
	}
	jsonArea := make([]byte, bh.hdrSize-binHeaderSize)
	if _, err := dev.ReadAt(jsonArea, offset+binHeaderSize); err != nil {
		return nil, nil, fmt.Errorf("reading JSON area at %d: %w", offset+binHeaderSize, err)
	}
	stored := append([]byte(nil), raw[offCsum:offCsum+h.Size()]...)
	clear(raw[offCsum : offCsum+csumLen])
	h.Write(raw)
	h.Write(jsonArea)
	if !bytes.Equal(h.Sum(nil), stored) {
		return nil, nil, fmt.Errorf("header checksum mismatch at offset %d", offset)
	}
	return bh, jsonArea, nil
}

// encode returns the binary header with its checksum over itself and jsonArea.
func (bh *binHeader) encode(secondary bool, jsonArea []byte) ([]byte, error) {
	raw := make([]byte, binHeaderSize)
	if secondary {
		copy(raw, magic2)
	} else {
		copy(raw, magic1)
	}
	binary.BigEndian.PutUint16(raw[offVersion:], 2)
	binary.BigEndian.PutUint64(raw[offHdrSize:], uint64(bh.hdrSize))
	binary.BigEndian.PutUint64(raw[offSeqID:], bh.seqID)
	if len(bh.label) >= labelLen || len(bh.subsystem) >= labelLen {
		return nil, errors.New("label or subsystem longer than 47 bytes")
	}
	copy(raw[offLabel:], bh.label)
	copy(raw[offCsumAlg:offCsumAlg+csumAlgLen-1], bh.csumAlg)
	copy(raw[offSalt:], bh.salt[:])
	copy(raw[offUUID:offUUID+uuidLen-1], bh.uuid)
	copy(raw[offSubsystem:], bh.subsystem)
	binary.BigEndian.PutUint64(raw[offHdrOffset:], uint64(bh.hdrOffset))
	h, err := csumHash(bh.csumAlg)
	if err != nil {
		return nil, err
	}
	h.Write(raw)
	h.Write(jsonArea)
	copy(raw[offCsum:], h.Sum(nil))
	return raw, nil
}

// fitLabel cuts a label or subsystem to the 47 bytes its NUL-terminated
// binary-header field holds, as cryptsetup does (it truncates silently).
func fitLabel(s string) string {
	if len(s) >= labelLen {
		return s[:labelLen-1]
	}
	return s
}
