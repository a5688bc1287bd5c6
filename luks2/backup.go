package luks2

import (
	"errors"
	"fmt"
	"io"
)

// backupSize is the number of bytes luksHeaderBackup copies: the header
// area (LUKS2: both copies and the keyslots area; LUKS1: up to the end of
// the last keyslot) rounded up to 4096 bytes.
func (h *header) backupSize() int64 {
	var n int64
	if h.v1 != nil {
		n = int64(h.v1.keyAreaEnd()) * 512
	} else {
		n = h.headerSize()
	}
	return (n + 4095) / 4096 * 4096
}

func backup(dev io.ReaderAt, size int64, w io.Writer) error {
	hd, err := readHeader(dev, size)
	if err != nil {
		return err
	}
	h := hd.impl
	n := h.backupSize()
	if size > 0 && n > size {
		return fmt.Errorf("device is smaller (%d bytes) than its header area (%d bytes)", size, n)
	}
	buf := make([]byte, n)
	if _, err := dev.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("reading the header area: %w", err)
	}
	if h.v1 != nil && h.v1.slots[0].offset*512 == 4096 {
		// cryptsetup clears what lies between the phdr and the first
		// keyslot, so a backup carries no stale signatures.
		clear(buf[luks1HeaderSize:4096])
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("writing the header backup: %w", err)
	}
	return nil
}

func restore(dev Device, size int64, src io.ReaderAt, srcSize int64) error {
	// The backup holds the header area only, not the data it describes (a
	// LUKS1 backup ends at its last keyslot, before the payload offset):
	// read it without a device size, then check it holds backupSize bytes.
	hd, err := readHeader(src, 0)
	if err != nil {
		return fmt.Errorf("backup file does not contain a valid LUKS header: %w", err)
	}
	b := hd.impl
	n := b.backupSize()
	if srcSize > 0 && n > srcSize {
		return errors.New("backup file is smaller than the header it describes")
	}
	if size > 0 && n > size {
		return fmt.Errorf("device is too small (%d bytes) for the %d-byte header backup", size, n)
	}
	if cur, err := readHeader(dev, size); err == nil {
		cs, err1 := cur.Segment()
		bs, err2 := hd.Segment()
		if err1 == nil && err2 == nil && (cs.Offset != bs.Offset || cs.KeySize != bs.KeySize) {
			return errors.New("data offset or key size differs on device and backup, restore failed")
		}
	}
	buf := make([]byte, n)
	if _, err := src.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("reading the header backup: %w", err)
	}
	if _, err := dev.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("writing the header: %w", err)
	}
	return syncDev(dev)
}
