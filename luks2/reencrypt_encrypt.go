package luks2

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ErrDeviceTooSmall: the device cannot hold the data after the reduction
// (cryptsetup's "Device ... is too small.").
var ErrDeviceTooSmall = errors.New("device is too small")

// EncryptInit marks the plain data on dev (devSize bytes) for encryption in
// place, as cryptsetup 2.6.1's reencrypt --encrypt --reduce-device-size
// reduce --init-only does without a detached header: the data keeps
// devSize-reduce bytes, a new LUKS2 header (opts, passphrase) takes the
// first reduce/2 bytes and the data starts there, shifted by reduce/2. The
// plaintext those bytes held is first copied to the device's last reduce/2
// bytes (the backup-moved-segment), durably; then the header is written.
// opts.DataOffset is set; opts.SectorSize defaults to 512, as cryptsetup's.
func EncryptInit(dev Device, devSize, reduce int64, opts FormatOptions, passphrase []byte) error {
	shift := reduce / 2
	if reduce <= 0 || shift%4096 != 0 {
		return fmt.Errorf("%w: reduce size %d (luksd shifts data by multiples of 4096 bytes)", ErrUnsupported, reduce)
	}
	dataSize := devSize - reduce
	if dataSize < 0 {
		return ErrDeviceTooSmall
	}
	if dataSize == 0 {
		return errors.New("no data is left after the reduction")
	}
	opts.DataOffset, opts.DetachedData, opts.PayloadAlign = shift, false, 0
	if opts.SectorSize == 0 {
		opts.SectorSize = 512
	}
	if opts.Version != 0 && opts.Version != 2 {
		return fmt.Errorf("%w: LUKS1 encryption", ErrUnsupported)
	}
	if int64(opts.SectorSize) > dataSize || dataSize%int64(opts.SectorSize) != 0 {
		return fmt.Errorf("device size is not aligned to the sector size %d", opts.SectorSize)
	}
	// Both buffers are mapped populated, as a hotzone's: Go slices this
	// large fault their pages in one by one.
	buf, free := hotzoneBuffer(int(shift))
	defer free()
	hdr := memDevice(buf)
	h, vk, err := Format(hdr, devSize, opts, passphrase)
	if err != nil {
		return err
	}
	defer clear(vk)
	v2, _ := h.v2()
	root, err := v2.encryptShiftMetadata(uint64(devSize), uint64(shift), uint64(dataSize), vk)
	if err != nil {
		return err
	}
	if err := v2.replace(hdr, root); err != nil {
		return err
	}
	moved, freeMoved := hotzoneBuffer(int(min(shift, dataSize)))
	defer freeMoved()
	if _, err := dev.ReadAt(moved, 0); err != nil {
		return fmt.Errorf("failed to read data at offset 0: %w", err)
	}
	if _, err := dev.WriteAt(moved, devSize-shift); err != nil {
		return fmt.Errorf("failed to write data at offset %d: %w", devSize-shift, err)
	}
	if err := dev.Flush(); err != nil {
		return err
	}
	if _, err := dev.WriteAt(hdr, 0); err != nil {
		return fmt.Errorf("failed to place new header at head of device: %w", err)
	}
	return flush(dev)
}

// encryptShiftMetadata is the freshly formatted metadata with the
// reencryption cryptsetup adds for an encryption with a data shift.
func (h *header) encryptShiftMetadata(devSize, shift, dataSize uint64, vk []byte) (*node, error) {
	final, err := h.meta.dataSegment()
	if err != nil {
		return nil, err
	}
	d := h.meta.segmentDigest(final.id)
	taken := map[int]bool{}
	reSlot, err := h.freeSlotExcept(taken)
	if err != nil {
		return nil, err
	}
	areaOff, err := h.areaGap(keyslotsAlign)
	if err != nil {
		return nil, err
	}
	root := h.meta.root.clone()
	area := obj("offset", jUint64Str(areaOff), "size", jUint64Str(keyslotsAlign), "type", jString("datashift"),
		"shift_size", jUint64Str(shift))
	root.get("keyslots").set(strconv.Itoa(reSlot), obj("area", area, "type", jString("reencrypt"), "key_size", jInt(1),
		"mode", jString("encrypt"), "direction", jString("backward"), "priority", jInt(0)))

	movedSize := min(shift, dataSize)
	segs := []*node{linearNode(devSize-shift, movedSize)}
	if dataSize > shift {
		segs = append(segs, linearNode(shift, dataSize-shift))
	}
	segs = append(segs, linearNode(devSize-shift, movedSize, "backup-moved-segment"),
		linearNode(0, dataSize, "backup-previous"),
		segmentNode(final.offset, 0, 0, final.cipher, final.sectorSize, "backup-final"))
	sn := jObject()
	for i, s := range segs {
		sn.set(strconv.Itoa(i), s)
	}
	root.set("segments", sn)
	digests := root.get("digests")
	digests.get(strconv.Itoa(d.id)).set("segments", idsNode([]int{len(segs) - 1}))
	addRequirement(root, "online-reencrypt-v"+strconv.Itoa(reencryptVersion))
	data, err := reencryptVerificationData(root, reencryptVersion, nil, vk)
	if err != nil {
		return nil, err
	}
	defer clear(data)
	rd, err := newDigestNode(data, "sha256", minPBKDF2Iterations, []int{reSlot}, nil)
	if err != nil {
		return nil, err
	}
	digests.set(strconv.Itoa(h.freeDigestIDs(1)[0]), rd)
	return root, nil
}

// NewUUID is a random UUID for a new header.
func NewUUID() (string, error) { return newUUID() }

// ReencryptMode is the mode of the reencryption the volume is marked for
// ("reencrypt", "encrypt" or "decrypt"), or "" when it is not.
func (h *Header) ReencryptMode() string {
	v2, ok := h.v2()
	if !ok {
		return ""
	}
	mode, _, _ := reencryptArea(v2.meta.root)
	return mode
}

// linearNode is a linear segment object in cryptsetup's field order.
func linearNode(offset, size uint64, flags ...string) *node {
	return withFlags(obj("type", jString("linear"), "offset", jUint64Str(offset), "size", jUint64Str(size)), flags)
}

// memDevice is a header built in memory before it goes to the device.
type memDevice []byte

func (m memDevice) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m memDevice) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m)) {
		return 0, fmt.Errorf("write of %d bytes at %d beyond the %d-byte header", len(p), off, len(m))
	}
	return copy(m[off:], p), nil
}

func (m memDevice) Flush() error { return nil }
