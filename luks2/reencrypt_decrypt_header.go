package luks2

import (
	"errors"
	"fmt"
	"strconv"
)

// Decryption in place of a volume with a detached header, as cryptsetup
// 2.6.1's reencrypt --decrypt --header HDR runs it: no data moves, the
// reencrypt keyslot says mode "decrypt", direction "backward" and the
// resilience asked for (checksum, journal or none); hotzones are
// decrypted from the end of the data to its start (reencrypt_run.go with
// a linear "cipher" for the plaintext, reencrypt_segments.go's
// backwardSegments). At the end the header stays a LUKS2 header with one
// linear segment and no keyslots or digests, as cryptsetup leaves it.

// DecryptInitDetached marks the volume whose header is on hdr (its data
// device devSize bytes) for decryption, as cryptsetup's reencrypt
// --decrypt --header HDR --init-only does: the old key is opened with
// passphrase (keyslot slot, or any with -1) for the reencryption digest,
// and the metadata is written in one header write. blockSize is the data
// device's block size (the checksum block is the larger of it and the
// sector size). A header whose data does not start at offset 0 gives
// ErrDecryptNotDetached with nothing written.
func (h *Header) DecryptInitDetached(hdr Device, devSize int64, passphrase []byte, slot int, p ReencryptParams, blockSize int) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 decryption", ErrUnsupported)
	}
	if err := v2.requirementsMet(); errors.Is(err, ErrReencryption) {
		return ErrReencryptionInitialized
	} else if err != nil {
		return err
	}
	old, err := v2.meta.dataSegment()
	if err != nil {
		return err
	}
	if old.typ != "crypt" || old.ivTweak != 0 {
		return fmt.Errorf("%w: segment 0 has an IV tweak or is not crypt", ErrReencryptUnsupported)
	}
	// With the data after the header (a header backup, or the device's
	// own header) decrypting in place would leave the data where no
	// header says it is.
	if v2.dataOffset() != 0 {
		return ErrDecryptNotDetached
	}
	if uint64(devSize) <= old.offset {
		return ErrDeviceTooSmall
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
	d := v2.meta.segmentDigest(old.id)
	vk, err := v2.openDigestKey(hdr, d, passphrase, slot)
	if err != nil {
		return err
	}
	defer clear(vk)
	reSlot, err := v2.freeSlotExcept(map[int]bool{})
	if err != nil {
		return err
	}
	areaOff, areaSize := v2.maxAreaGap()
	if areaSize == 0 {
		return ErrNoKeyslotSpace
	}
	root := v2.meta.root.clone()
	area := obj("offset", jUint64Str(areaOff), "size", jUint64Str(areaSize), "type", jString(p.Resilience))
	if p.Resilience == "checksum" {
		area.set("hash", jString(p.Hash))
		area.set("sector_size", jInt(int64(max(blockSize, old.sectorSize))))
	}
	root.get("keyslots").set(strconv.Itoa(reSlot), obj("area", area, "type", jString("reencrypt"), "key_size", jInt(1),
		"mode", jString("decrypt"), "direction", jString("backward"), "priority", jInt(0)))
	segs := jObject()
	segs.set("0", root.get("segments").get(strconv.Itoa(old.id)).clone())
	segs.set("1", segmentNode(old.offset, old.size, 0, old.cipher, old.sectorSize, "backup-previous"))
	segs.set("2", linearSegment(old.offset, old.size, "backup-final"))
	root.set("segments", segs)
	digests := root.get("digests")
	digests.get(strconv.Itoa(d.id)).set("segments", idsNode([]int{0, 1}))
	addRequirement(root, "online-reencrypt-v"+strconv.Itoa(reencryptVersion))
	data, err := reencryptVerificationData(root, reencryptVersion, vk, nil)
	if err != nil {
		return err
	}
	defer clear(data)
	rd, err := newDigestNode(data, "sha256", minPBKDF2Iterations, []int{reSlot}, nil)
	if err != nil {
		return err
	}
	digests.set(strconv.Itoa(v2.freeDigestIDs(1)[0]), rd)
	return v2.replace(hdr, root)
}
