package luks2

import (
	"fmt"

	"github.com/luksd/luksd/dmcrypt"
)

// Opening a volume in reencryption, as cryptsetup 2.6.1's
// _open_and_activate_reencrypt_device: a hotzone a crash left (the
// in-reencryption segment) is recovered first, under the caller's
// metadata lock; a recovery that completes the reencryption finishes it
// and the volume opens as any other. Otherwise both volume keys are
// opened, the reencryption digest is checked, and the data segments are
// mapped one after the other, each with its own key (the dm table
// LUKS2_activate_multi loads: one crypt target per segment).

// MappedSegment is one data segment of a volume in reencryption.
type MappedSegment struct {
	Segment        // Offset on the device; Size 0 = to its end (last segment only)
	IVTweak uint64 // added to IV sectors, 512-byte units
	New     bool   // keyed with the new volume key, else the old one
	Linear  bool   // plaintext, not encrypted (an encryption's data not done yet)
}

// ReencryptMapping is what mapping a volume in reencryption takes.
type ReencryptMapping struct {
	Segments       []MappedSegment // in plaintext order; one, keyed New, once the reencryption is over
	OldKey, NewKey []byte          // OldKey nil once the reencryption is over
	Final          Segment         // the segment the reencryption ends with (cryptsetup's default segment)
	Slot           int             // the keyslot that opened the new key
}

// Wipe clears the keys.
func (m *ReencryptMapping) Wipe() {
	clear(m.OldKey)
	clear(m.NewKey)
}

// OpenReencrypting unlocks a volume marked for reencryption with
// passphrase (keyslot slot, or any with -1), recovers a crashed hotzone
// and returns its data segments. dev holds header and data (devSize
// bytes); commit runs each header write (the caller holds the metadata
// lock for the whole call, as cryptsetup does for recovery).
func (h *Header) OpenReencrypting(dev Device, devSize int64, passphrase []byte, slot int, commit func(write func() error) error) (*ReencryptMapping, error) {
	return h.OpenReencryptingDetached(dev, dev, devSize, passphrase, slot, commit)
}

// OpenReencryptingDetached is OpenReencrypting for a header on hdr and
// the data on data (dataSize bytes), as with cryptsetup's --header.
func (h *Header) OpenReencryptingDetached(hdr, data Device, dataSize int64, passphrase []byte, slot int, commit func(write func() error) error) (*ReencryptMapping, error) {
	v2, ok := h.v2()
	if !ok || !h.InReencryption() {
		return nil, ErrNotInReencryption
	}
	if isEncryptShift(v2.meta.root) {
		if hdr != data {
			return nil, fmt.Errorf("%w: encryption with a data shift and a detached header", ErrReencryptUnsupported)
		}
		return v2.openEncryptShift(hdr, dataSize, passphrase, slot, commit)
	}
	if isReencryptShift(v2.meta.root) {
		if hdr != data {
			return nil, fmt.Errorf("%w: reencryption with a data shift and a detached header", ErrReencryptUnsupported)
		}
		return v2.openReencryptShift(hdr, dataSize, passphrase, slot, commit)
	}
	return v2.openReencrypting(hdr, data, dataSize, passphrase, slot, commit)
}

func (h *header) openReencrypting(dev, data Device, devSize int64, passphrase []byte, slot int, commit func(write func() error) error) (*ReencryptMapping, error) {
	st, err := h.reencryptState()
	if err != nil {
		return nil, err
	}
	if st.backward {
		return nil, fmt.Errorf("%w: activation during a decryption", ErrReencryptUnsupported)
	}
	for _, s := range []*segment{st.oldSeg, st.newSeg} {
		if s.typ == "linear" {
			continue
		}
		if err := safeCipher(s.cipher); err != nil {
			return nil, fmt.Errorf("%w: segment %d: %v", ErrUnsupported, s.id, err)
		}
		if !ValidSectorSize(2, s.sectorSize) {
			return nil, fmt.Errorf("%w: segment %d sector size %d", ErrUnsupported, s.id, s.sectorSize)
		}
	}
	j := &reencryptJob{h: h, dev: dev, st: st, run: ReencryptRun{Data: data, Commit: commit}}
	if j.total, err = st.dataSize(devSize); err != nil {
		return nil, err
	}
	if j.run.Commit == nil {
		j.run.Commit = func(write func() error) error { return write() }
	}
	newVK, newSlot, err := h.openDigestKeySlot(dev, st.newDigest, passphrase, slot)
	if err != nil {
		return nil, err
	}
	m := &ReencryptMapping{NewKey: newVK, Slot: newSlot}
	m.Final = Segment{Offset: int64(st.dataOffset), Size: int64(st.newSeg.size), Cipher: st.newSeg.cipher,
		SectorSize: st.newSeg.sectorSize, KeySize: len(newVK)}
	if st.mode == "reencrypt" && len(st.oldKeyslots()) == 0 && st.hot == nil && st.done >= j.total {
		// cryptsetup killed while it finished (see reencrypt): all of
		// the data is new; finish, as a resume would.
		if err := j.finish(); err != nil {
			m.Wipe()
			return nil, err
		}
		m.Segments = []MappedSegment{{Segment: m.Final, New: true}}
		return m, nil
	}
	var oldVK []byte
	if st.oldDigest != nil { // an encryption has no old key
		if oldVK, err = h.openDigestKey(dev, st.oldDigest, passphrase, slot); err != nil {
			m.Wipe()
			return nil, err
		}
	}
	m.OldKey = oldVK
	if err := h.verifyReencryptDigest(st, oldVK, newVK); err != nil {
		m.Wipe()
		return nil, err
	}
	st.done = min(st.done, j.total)
	if st.hot != nil {
		if err := j.recoverWithKeys(oldVK, newVK); err != nil {
			m.Wipe()
			return nil, fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
		}
	}
	if st.done >= j.total {
		// Recovery rewrote the last hotzone: the reencryption is over.
		if err := j.finish(); err != nil {
			m.Wipe()
			return nil, err
		}
		clear(m.OldKey)
		m.OldKey = nil
		m.Segments = []MappedSegment{{Segment: m.Final, New: true}}
		return m, nil
	}
	m.Segments = st.mappedSegments(j.total, len(oldVK), len(newVK))
	return m, nil
}

// recoverWithKeys runs recover with the job's ciphers made from the keys.
func (j *reencryptJob) recoverWithKeys(oldVK, newVK []byte) error {
	var err error
	if j.old, err = segmentCipher(j.st.oldSeg, oldVK); err != nil {
		return err
	}
	defer j.old.Wipe()
	if j.new, err = dmcrypt.New(j.st.newSeg.cipher, newVK); err != nil {
		return err
	}
	defer j.new.Wipe()
	return j.recover()
}

// mappedSegments are the data segments of a reencryption done bytes in
// (no hotzone): the new cipher before, the old one after.
func (st *reencryptState) mappedSegments(total uint64, oldKeySize, newKeySize int) []MappedSegment {
	var segs []MappedSegment
	if st.done > 0 {
		segs = append(segs, MappedSegment{Segment: Segment{Offset: int64(st.dataOffset), Size: int64(st.done),
			Cipher: st.newSeg.cipher, SectorSize: st.newSeg.sectorSize, KeySize: newKeySize}, New: true})
	}
	size := int64(0) // dynamic, as the old segment is
	if st.oldSeg.size != 0 {
		size = int64(total - st.done)
	}
	if st.oldSeg.typ == "linear" {
		return append(segs, MappedSegment{Segment: Segment{Offset: int64(st.dataOffset + st.done), Size: size}, Linear: true})
	}
	segs = append(segs, MappedSegment{Segment: Segment{Offset: int64(st.dataOffset + st.done), Size: size,
		Cipher: st.oldSeg.cipher, SectorSize: st.oldSeg.sectorSize, KeySize: oldKeySize}, IVTweak: st.done / 512})
	return segs
}
