package luks2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// backupSize is the number of bytes luksHeaderBackup copies: the header
// area (LUKS2: both copies and the keyslots area; LUKS1: up to the end of
// the last keyslot) rounded up to 4096 bytes.
func backupSize(h onDisk) int64 { return (h.areaEnd() + 4095) / 4096 * 4096 }

func backup(dev io.ReaderAt, size int64, w io.Writer) error {
	hd, err := readHeader(dev, size)
	if err != nil {
		return err
	}
	h := hd.impl
	n := backupSize(h)
	if size > 0 && n > size {
		return fmt.Errorf("device is smaller (%d bytes) than its header area (%d bytes)", size, n)
	}
	buf := make([]byte, n)
	if _, err := dev.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("reading the header area: %w", err)
	}
	h.scrubBackup(buf)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("writing the header backup: %w", err)
	}
	return nil
}

// areaEnd: both header copies and the keyslots area.
func (h *header) areaEnd() int64 { return h.headerSize() }

// scrubBackup: a LUKS2 backup is the header area as it is.
func (h *header) scrubBackup([]byte) {}

// areaEnd: up to the end of the last keyslot's key material.
func (h *luks1Header) areaEnd() int64 { return int64(h.keyAreaEnd()) * 512 }

// scrubBackup clears what lies between the phdr and a first keyslot at
// 4 KiB, as cryptsetup does, so a backup carries no stale signatures.
func (h *luks1Header) scrubBackup(buf []byte) {
	if h.slots[0].offset*512 == 4096 {
		clear(buf[luks1HeaderSize:4096])
	}
}

// restoreBackup reads and checks a header backup: the header, and the
// number of bytes luksHeaderRestore writes (LUKS2: both header copies and
// the keyslots area; LUKS1: up to the end of the last keyslot's key
// material, as cryptsetup writes it).
func restoreBackup(src io.ReaderAt, srcSize int64) (onDisk, int64, error) {
	// The backup holds the header area only, not the data it describes (a
	// LUKS1 backup ends at its last keyslot, before the payload offset):
	// read it without a device size, then check it holds enough bytes.
	hd, err := readHeader(src, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("backup file does not contain a valid LUKS header: %w", err)
	}
	b := hd.impl
	n := b.areaEnd()
	if srcSize > 0 && n > srcSize {
		return nil, 0, errors.New("backup file is smaller than the header it describes")
	}
	return b, n, nil
}

func checkRestore(dev io.ReaderAt, size int64, src io.ReaderAt, srcSize int64) (RestoreCheck, error) {
	b, _, err := restoreBackup(src, srcSize)
	if err != nil {
		return RestoreCheck{}, err
	}
	rc := RestoreCheck{Version: b.version()}
	// cryptsetup restores no backup with requirements it would refuse to
	// edit, but for a reencryption it can resume.
	if err := b.requirementsMet(); err != nil && !errors.Is(err, ErrReencryption) {
		return rc, ErrRestoreRequirements
	}
	var head [8]byte
	if _, err := dev.ReadAt(head[:], 0); err == nil && bytes.Equal(head[:magicLen], magic1) {
		if v := int(binary.BigEndian.Uint16(head[offVersion:])); v != rc.Version && rc.Version == 1 {
			// cryptsetup reads the device as LUKS1 and says why not.
			rc.OtherVersion = v
		}
	}
	cur, err := readHeader(dev, size)
	if err != nil || cur.impl.version() != rc.Version {
		return rc, nil
	}
	c := cur.impl
	rc.Replaces = true
	rc.UUIDDiffers = c.uuid() != b.uuid()
	return rc, c.checkReplace(b, &rc)
}

// checkReplace: a LUKS1 backup must keep the payload offset and key size.
func (h *luks1Header) checkReplace(b onDisk, _ *RestoreCheck) error {
	if b1 := b.(*luks1Header); h.payloadOffset != b1.payloadOffset || h.keyBytes != b1.keyBytes {
		return ErrRestoreDataOffset
	}
	return nil
}

// checkReplace: a LUKS2 backup must keep the data offset and the size of
// the header area, unless an offline reencryption moved the data; the
// header's requirements go into cryptsetup's question.
func (h *header) checkReplace(b onDisk, rc *RestoreCheck) error {
	switch err := h.requirementsMet(); {
	case errors.Is(err, ErrUnmetRequirements):
		rc.UnknownRequirements = true
	case errors.Is(err, ErrLegacyReencryption):
		// An offline reencryption moves the data: cryptsetup compares
		// no offsets then.
		rc.OfflineReencryption = true
		return nil
	}
	b2 := b.(*header)
	if h.dataOffset() != b2.dataOffset() {
		return ErrRestoreDataOffset
	}
	if h.areaEnd() != b2.areaEnd() {
		return ErrRestoreAreaSize
	}
	return nil
}

// dataOffset is where cryptsetup's LUKS2_get_data_offset says data starts:
// the lowest segment offset (0 without segments).
func (h *header) dataOffset() uint64 {
	var off uint64
	for i, id := range sortedIDs(h.meta.segments) {
		if s := h.meta.segments[id]; i == 0 || s.offset < off {
			off = s.offset
		}
	}
	return off
}
