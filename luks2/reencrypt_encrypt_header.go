package luks2

import (
	"fmt"
	"strconv"
)

// Encryption in place with a detached header, as cryptsetup 2.6.1's
// reencrypt --encrypt --header HDR runs it: the data stays where it is
// (data offset 0, no shift), the reencrypt keyslot says mode "encrypt",
// direction "forward" and the resilience asked for (checksum, journal or
// none) over the largest free part of the keyslots area, the old segment
// is linear and has no key. The steps are a reencryption's
// (reencrypt_run.go) with the plaintext read through a linear "cipher".

// EncryptHeaderSize is the size of the header file a detached-header
// encryption with opts writes: both metadata copies and the keyslots area.
func EncryptHeaderSize(opts FormatOptions) (int64, error) {
	opts.DetachedData, opts.DataOffset = true, 0
	l, err := FormatLayout(opts)
	if err != nil {
		return 0, err
	}
	return 2*l.MetadataSize + l.KeyslotsSize, nil
}

// EncryptInitDetached marks the plain data device (devSize bytes) for
// encryption in place with a new LUKS2 header (opts, passphrase) on hdr,
// as cryptsetup's reencrypt --encrypt --header HDR --init-only does, in
// one header write; nothing on the data device changes. blockSize is the
// data device's block size (the checksum block is the larger of it and
// the sector size); opts.SectorSize defaults to 512, as cryptsetup's.
func EncryptInitDetached(hdr Device, devSize int64, opts FormatOptions, passphrase []byte, p ReencryptParams, blockSize int) error {
	if opts.Version != 0 && opts.Version != 2 {
		return fmt.Errorf("%w: LUKS1 encryption", ErrUnsupported)
	}
	opts.DetachedData, opts.DataOffset, opts.PayloadAlign = true, 0, 0
	if opts.SectorSize == 0 {
		opts.SectorSize = 512
	}
	if devSize <= 0 {
		return ErrDeviceTooSmall
	}
	if devSize%int64(opts.SectorSize) != 0 {
		return fmt.Errorf("device size is not aligned to the sector size %d", opts.SectorSize)
	}
	switch p.Resilience {
	case "":
		p.Resilience = "checksum"
	case "checksum", "journal", "none":
	default:
		return fmt.Errorf("unsupported resilience mode %s", p.Resilience)
	}
	if p.Hash == "" {
		p.Hash = "sha256"
	}
	if _, err := hashFunc(p.Hash); p.Resilience == "checksum" && err != nil {
		return err
	}
	size, err := EncryptHeaderSize(opts)
	if err != nil {
		return err
	}
	mem := make(memDevice, size)
	h, vk, err := Format(mem, devSize, opts, passphrase)
	if err != nil {
		return err
	}
	defer clear(vk)
	v2, _ := h.v2()
	root, err := v2.encryptMetadata(vk, p, max(blockSize, opts.SectorSize))
	if err != nil {
		return err
	}
	if err := v2.replace(mem, root); err != nil {
		return err
	}
	if _, err := hdr.WriteAt(mem, 0); err != nil {
		return fmt.Errorf("failed to write the header: %w", err)
	}
	return flush(hdr)
}

// encryptMetadata is the freshly formatted metadata with the reencryption
// cryptsetup adds for an encryption without a data shift; block is the
// checksum block size.
func (h *header) encryptMetadata(vk []byte, p ReencryptParams, block int) (*node, error) {
	final, err := h.meta.dataSegment()
	if err != nil {
		return nil, err
	}
	d := h.meta.segmentDigest(final.id)
	reSlot, err := h.freeSlotExcept(map[int]bool{})
	if err != nil {
		return nil, err
	}
	areaOff, areaSize := h.maxAreaGap()
	if areaSize == 0 {
		return nil, ErrNoKeyslotSpace
	}
	root := h.meta.root.clone()
	area := obj("offset", jUint64Str(areaOff), "size", jUint64Str(areaSize), "type", jString(p.Resilience))
	if p.Resilience == "checksum" {
		area.set("hash", jString(p.Hash))
		area.set("sector_size", jInt(int64(block)))
	}
	root.get("keyslots").set(strconv.Itoa(reSlot), obj("area", area, "type", jString("reencrypt"), "key_size", jInt(1),
		"mode", jString("encrypt"), "direction", jString("forward"), "priority", jInt(0)))
	segs := jObject()
	segs.set("0", linearSegment(final.offset, final.size))
	segs.set("1", linearSegment(final.offset, final.size, "backup-previous"))
	segs.set("2", segmentNode(final.offset, final.size, 0, final.cipher, final.sectorSize, "backup-final"))
	root.set("segments", segs)
	digests := root.get("digests")
	digests.get(strconv.Itoa(d.id)).set("segments", idsNode([]int{2}))
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

// ReencryptResilience is the resilience type of the reencryption the
// volume is marked for ("checksum", "datashift", ...; "" when it is not).
func (h *Header) ReencryptResilience() string {
	v2, ok := h.v2()
	if !ok {
		return ""
	}
	_, _, area := reencryptArea(v2.meta.root)
	return area
}
