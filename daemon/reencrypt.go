package daemon

import (
	"fmt"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
)

// A volume in the middle of a LUKS2 reencryption is mapped as dm-crypt
// maps it (cryptsetup's LUKS2_activate_multi): its data segments one
// after the other, each read and written with its own cipher, key, sector
// size and IV offset. The CLI recovers an interrupted hotzone and lists
// the segments in Spec.Segments; the daemon only maps them.

// reencrypting reports whether spec maps a volume in reencryption.
func (spec Spec) reencrypting() bool { return len(spec.Segments) > 0 }

// newSegmented puts the segmented crypt layer over backend, each
// segment keyed with its part of key, and reports whether every key
// schedule is locked in memory (as openCrypt's).
func newSegmented(backend blockdev.Device, spec Spec, key []byte) (_ *dmcrypt.Device, keysLocked bool, err error) {
	var segs []dmcrypt.Segment
	keysLocked = true
	wipe := func() {
		for _, s := range segs {
			s.Cipher.Wipe()
		}
	}
	for i, seg := range spec.Segments {
		if seg.Cipher == LinearSegment {
			segs = append(segs, dmcrypt.Segment{Cipher: dmcrypt.Linear(), Offset: seg.Offset, Size: seg.Size, SectorSize: 512})
			continue
		}
		if seg.KeyOffset < 0 || seg.KeySize <= 0 || seg.KeyOffset+seg.KeySize > len(key) {
			wipe()
			backend.Close()
			return nil, false, fmt.Errorf("segment %d: key of %d bytes at %d is outside the %d-byte key", i, seg.KeySize, seg.KeyOffset, len(key))
		}
		c, err := sectorCipher(seg, key[seg.KeyOffset:seg.KeyOffset+seg.KeySize])
		if err != nil {
			wipe()
			backend.Close()
			return nil, false, fmt.Errorf("segment %d: cipher %s: %w", i, seg.Cipher, err)
		}
		_, lerr := keyring.LockReachable(c)
		keysLocked = keysLocked && lerr == nil
		segs = append(segs, dmcrypt.Segment{Cipher: c, Offset: seg.Offset, Size: seg.Size,
			SectorSize: seg.SectorSize, IVOffset: seg.IVOffset})
	}
	d, err := dmcrypt.NewSegmented(backend, segs, dmcrypt.DeviceOptions{
		AllowDiscards: spec.Options.AllowDiscards,
		ReadOnly:      spec.Options.ReadOnly,
	})
	if err != nil {
		backend.Close()
	}
	return d, keysLocked, err
}

// blockSize is the block size the frontend exposes: the largest sector
// size of the segments, as the kernel stacks a dm table's limits.
func (spec Spec) blockSize() int {
	bs := spec.Segment.SectorSize
	for _, s := range spec.Segments {
		bs = max(bs, s.SectorSize)
	}
	return bs
}

// reencryptionStatus is cryptsetup status's reencryption line's value.
func (spec Spec) reencryptionStatus() string {
	if spec.reencrypting() {
		return "in-progress"
	}
	return ""
}

// reencryptedBytes are the bytes of data in the new cipher: the segments
// keyed with the new key, which follows the old one in the key.
func (spec Spec) reencryptedBytes() int64 {
	var n int64
	for _, s := range spec.Segments {
		if s.KeyOffset > 0 {
			n += s.Size
		}
	}
	return n
}
