package luks2

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Reading a header as cryptsetup 2.6.1's LUKS2_disk_hdr_read does: each
// copy is good (binary header, checksum and metadata valid), obsolete
// (binary header and checksum good, metadata not, or an older seqid than
// the other good copy) or failed; the secondary is sought at the primary's
// hdr_size, or at every standard offset when the primary's binary header
// failed. The good copy with the higher seqid is used, the primary on a
// tie. A copy that is not good can be rewritten from the good one (Repair),
// as cryptsetup does on load when it may write.

// isLUKS reports whether dev starts with a LUKS magic and version 1 or 2
// (the primary header's; a LUKS2 volume whose primary is damaged may still
// read through its secondary).
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

// headerCopy is one LUKS2 header copy as read.
type headerCopy struct {
	bin  *binHeader // binary header and checksum good
	area []byte     // its JSON area, as read
	meta *metadata  // the metadata is valid too: a good copy
	err  error
}

func (c *headerCopy) good() bool { return c.meta != nil }

func loadCopy(dev io.ReaderAt, offset int64, secondary bool) *headerCopy {
	bh, area, err := readCopy(dev, offset, secondary)
	if err != nil {
		return &headerCopy{err: err}
	}
	c := &headerCopy{bin: bh, area: area}
	root, err := parseArea(area)
	if err == nil {
		err = validateOrRepair(root, uint64(bh.hdrSize-binHeaderSize))
	}
	if err != nil {
		c.err = err
		return c
	}
	c.meta = buildMetadata(root)
	return c
}

func readHeader(dev io.ReaderAt, size int64) (*Header, error) {
	return readHeaderAs(dev, size, 0)
}

// readHeaderAs reads the header as the version asked for (0: as the
// primary says; 2: LUKS2 whatever the primary says, as cryptsetup loads
// with --type luks2).
func readHeaderAs(dev io.ReaderAt, size int64, version int) (*Header, error) {
	var b [8]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil && err != io.EOF {
		return nil, &ReadError{Err: err}
	}
	// cryptsetup goes by the primary's version: 1 is LUKS1, 2 (or no
	// primary magic at all) LUKS2, anything else unsupported.
	if version != 2 && bytes.Equal(b[:magicLen], magic1) {
		switch v := binary.BigEndian.Uint16(b[offVersion:]); v {
		case 1:
			h1, err := readLUKS1(dev, size)
			if err != nil {
				return nil, err
			}
			return &Header{impl: h1}, nil
		case 0, 2:
		default:
			return nil, &VersionError{Version: int(v)}
		}
	}
	primary, secondary := readCopies(dev)
	h := &header{}
	switch {
	case primary.good():
		h.bin, h.meta = *primary.bin, primary.meta
		h.salt2, h.goodArea = secondary.saltOr(), primary.area
		if !secondary.good() {
			h.damaged = "secondary"
		}
	case secondary.good():
		h.bin, h.meta = *secondary.bin, secondary.meta
		h.salt2, h.bin.salt, h.damaged = secondary.bin.salt, primary.saltOr(), "primary"
		h.bin.hdrOffset = 0
		h.goodArea = secondary.area
	default:
		return nil, fmt.Errorf("%w: primary header: %v; secondary header: %v", ErrNotLUKS, primary.err, secondary.err)
	}
	if need := h.headerSize(); size > 0 && need > size {
		return nil, &TooSmallError{Need: need}
	}
	return &Header{impl: h}, nil
}

// readCopies reads both copies and marks the one with the lower seqid
// obsolete when both are good.
func readCopies(dev io.ReaderAt) (primary, secondary *headerCopy) {
	primary = loadCopy(dev, 0, false)
	if primary.bin != nil {
		secondary = loadCopy(dev, primary.bin.hdrSize, true)
	} else {
		// No hdr_size to go by: the first standard offset holding a
		// secondary binary header with a good checksum.
		secondary = &headerCopy{err: errors.New("no secondary LUKS2 header")}
		for _, off := range hdrSizes {
			if c := loadCopy(dev, off, true); c.bin != nil {
				secondary = c
				break
			}
		}
	}
	if primary.good() && secondary.good() {
		switch {
		case primary.bin.seqID > secondary.bin.seqID:
			secondary.meta, secondary.err = nil, errors.New("older seqid than the primary")
		case primary.bin.seqID < secondary.bin.seqID:
			primary.meta, primary.err = nil, errors.New("older seqid than the secondary")
		}
	}
	return primary, secondary
}

// saltOr returns the copy's salt, or a new random one when it has none.
func (c *headerCopy) saltOr() [saltLen]byte {
	if c.bin != nil {
		return c.bin.salt
	}
	var s [saltLen]byte
	rand.Read(s[:])
	return s
}

// repair rewrites the copy that was not good from the one that was, as
// cryptsetup's auto-recovery does: the good copy's binary header (same
// seqid) and JSON area as read, a fresh salt, then a flush.
func (h *header) repair(dev Device) error {
	if h.damaged == "" {
		return nil
	}
	bh := h.bin
	secondary := h.damaged == "secondary"
	if secondary {
		bh.hdrOffset = h.bin.hdrSize
	}
	if _, err := rand.Read(bh.salt[:]); err != nil {
		return err
	}
	if err := writeCopy(dev, &bh, secondary, h.goodArea); err != nil {
		return err
	}
	if err := flush(dev); err != nil {
		return err
	}
	if secondary {
		h.salt2 = bh.salt
	} else {
		h.bin.salt = bh.salt
	}
	h.damaged = ""
	return nil
}
