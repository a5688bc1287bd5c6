package luks2

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/luksd/luksd/dmcrypt"
)

// Reencryption with a data shift, as cryptsetup 2.6.1's reencrypt
// --reduce-device-size runs it on a LUKS2 volume (mode "reencrypt",
// direction "backward", resilience "datashift"): the data moves shift
// bytes toward the device's end as it is rewritten to the new key, the
// data offset grows by shift and the data's last shift bytes are given
// up. Hotzones of at most shift bytes go from the end of the data to its
// start; each is read at the old offset and written shift bytes further,
// so its source is never overwritten before it is committed and a crash
// is repaired by rewriting the hotzone again.
//
// At data offset L (bytes from the start of the data), the segments are
// the old cipher at the old offset for [0, L) (its size fixed, dynamic
// only before the first step), the hotzone at the new offset (flagged
// in-reencryption, only while it is written), the new cipher at the new
// offset from the hotzone on (dynamic), then backup-previous and
// backup-final. Each key's digest is bound to the hotzone first, then to
// its own segments in order, then to its backup segment.

// ErrShiftBeyondData: a data shift that leaves no data (cryptsetup's
// "Failed to load LUKS2 reencryption context.").
var ErrShiftBeyondData = errors.New("data shift leaves no data")

// isReencryptShift reports whether the reencryption is a reencryption
// with a data shift.
func isReencryptShift(root *node) bool {
	mode, dir, area := reencryptArea(root)
	return mode == "reencrypt" && dir == "backward" && area == "datashift"
}

// reshiftJob is a reencryption with a data shift being run.
type reshiftJob struct {
	h      *header
	dev    Device
	run    ReencryptRun
	slot   int // the reencrypt keyslot
	shift  uint64
	oldOff uint64 // the data offset before
	newOff uint64 // and after
	total  uint64 // data bytes after the shift
	prev   *node  // backup-previous: the old cipher
	final  *node  // backup-final: the new cipher
	prevID int
	finID  int
	oldD   *digest
	newD   *digest
	old    dmcrypt.SectorCipher
	new    dmcrypt.SectorCipher
}

// reshiftState reads the metadata of a reencryption with a data shift on
// a device of devSize bytes.
func (h *header) reshiftState(dev Device, devSize int64, run ReencryptRun) (*reshiftJob, error) {
	root := h.meta.root
	ks := reencryptKeyslotNode(root)
	j := &reshiftJob{h: h, dev: dev, run: run, prevID: -1, finID: -1}
	for id, k := range h.meta.keyslots {
		if k.obj == ks {
			j.slot = id
		}
	}
	j.shift = uint64Field(ks.get("area"), "shift_size")
	for id, s := range h.meta.segments {
		switch {
		case slicesContains(s.flags, "backup-previous"):
			j.prevID = id
		case slicesContains(s.flags, "backup-final"):
			j.finID = id
		}
	}
	j.prev, j.final = segmentByFlag(root, "backup-previous"), segmentByFlag(root, "backup-final")
	if j.prev == nil || j.final == nil || j.prev.get("type").str != "crypt" || j.final.get("type").str != "crypt" {
		return nil, fmt.Errorf("%w: backup segments", ErrReencryptInvalid)
	}
	j.oldOff, j.newOff = uint64Field(j.prev, "offset"), uint64Field(j.final, "offset")
	j.oldD, j.newD = h.meta.segmentDigest(j.prevID), h.meta.segmentDigest(j.finID)
	if j.shift == 0 || j.newOff != j.oldOff+j.shift || j.oldD == nil || j.newD == nil || j.oldD == j.newD ||
		segmentSize(j.prev) != 0 || segmentSize(j.final) != 0 {
		return nil, fmt.Errorf("%w: data shift segments", ErrReencryptInvalid)
	}
	if uint64(devSize) <= j.newOff {
		return nil, ErrShiftBeyondData
	}
	j.total = uint64(devSize) - j.newOff
	if j.run.Data == nil {
		j.run.Data = dev
	}
	if j.run.Commit == nil {
		j.run.Commit = func(write func() error) error { return write() }
	}
	return j, nil
}

// reencryptShift runs (or resumes) the reencryption on dev.
func (h *header) reencryptShift(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) error {
	j, err := h.reshiftState(dev, devSize, run)
	if err != nil {
		return err
	}
	active := activeSegments(h.meta.root)
	if j.front(active) == 0 && hotIndex(active) < 0 && len(j.oldD.keyslots) == 0 {
		// Killed while it finished: the old keyslots are gone already,
		// the new key alone finishes it.
		vk, err := h.openDigestKey(dev, j.newD, passphrase, slot)
		if err != nil {
			return err
		}
		clear(vk)
		return j.finish()
	}
	oldVK, err := h.openDigestKey(dev, j.oldD, passphrase, slot)
	if err != nil {
		return err
	}
	defer clear(oldVK)
	newVK, err := h.openDigestKey(dev, j.newD, passphrase, slot)
	if err != nil {
		return err
	}
	defer clear(newVK)
	if err := j.verifyDigest(oldVK, newVK); err != nil {
		return err
	}
	if j.old, err = dmcrypt.New(j.prev.get("encryption").str, oldVK); err != nil {
		return err
	}
	defer j.old.Wipe()
	if j.new, err = dmcrypt.New(j.final.get("encryption").str, newVK); err != nil {
		return err
	}
	defer j.new.Wipe()
	return j.loop(active)
}

// verifyDigest checks the reencryption digest with both keys.
func (j *reshiftJob) verifyDigest(oldVK, newVK []byte) error {
	version, ok := reencryptVersionOf(j.h.meta.mandatory)
	if !ok {
		return fmt.Errorf("%w: requirement %v", ErrReencryptUnsupported, j.h.meta.mandatory)
	}
	return j.h.checkReencryptDigest(j.slot, version, oldVK, newVK, ErrReencryptInvalid)
}

// isOld reports whether s is the segment of the data still in the old
// cipher (at the old offset; the rest is at the new one).
func (j *reshiftJob) isOld(s *node) bool {
	return uint64Field(s, "offset") == j.oldOff
}

// front is the data still in the old cipher, the hotzone included: the
// data before the first new segment.
func (j *reshiftJob) front(active []*node) uint64 {
	if r := hotIndex(active); r >= 0 {
		return uint64Field(active[r], "offset") - j.newOff + segmentSize(active[r])
	}
	if len(active) == 0 || !j.isOld(active[0]) {
		return 0
	}
	if n := segmentSize(active[0]); n != 0 {
		return min(n, j.total)
	}
	return j.total // dynamic: nothing rewritten yet
}

// segments are the data segments with [0, front) still old, the hotzone
// [front-n, front) being written when n > 0.
func (j *reshiftJob) segments(front, n uint64) []*node {
	var out []*node
	l := front - n
	cipher, sector := j.final.get("encryption").str, int(int64Of(j.final.get("sector_size")))
	if l > 0 {
		out = append(out, segmentNode(j.oldOff, l, 0, j.prev.get("encryption").str, int(int64Of(j.prev.get("sector_size")))))
	}
	if n > 0 {
		out = append(out, segmentNode(j.newOff+l, n, l/512, cipher, sector, "in-reencryption"))
	}
	if front < j.total {
		out = append(out, segmentNode(j.newOff+front, 0, front/512, cipher, sector))
	}
	return out
}

// rootWith is the metadata with the data segments active, then the
// backups, each key's digest bound as cryptsetup binds it.
func (j *reshiftJob) rootWith(active []*node) *node {
	root := j.h.meta.root.clone()
	segs := jObject()
	for i, s := range active {
		segs.set(strconv.Itoa(i), s)
	}
	prev, final := len(active), len(active)+1
	segs.set(strconv.Itoa(prev), j.prev.clone())
	segs.set(strconv.Itoa(final), j.final.clone())
	root.set("segments", segs)
	r := hotIndex(active)
	var oldIDs, newIDs []int
	if r >= 0 {
		oldIDs, newIDs = []int{r}, []int{r}
	}
	for i, s := range active {
		switch {
		case i == r:
		case j.isOld(s):
			oldIDs = append(oldIDs, i)
		default:
			newIDs = append(newIDs, i)
		}
	}
	digests := root.get("digests")
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	digests.get(strconv.Itoa(j.oldD.id)).set("segments", idsNode(append(oldIDs, prev)))
	digests.get(strconv.Itoa(j.newD.id)).set("segments", idsNode(append(newIDs, final)))
	return root
}

func (j *reshiftJob) commit(root *node) error {
	return j.run.Commit(func() error { return j.h.replace(j.dev, root) })
}

// hotzoneOf is the hotzone of hot: its data offset and length.
func (j *reshiftJob) hotzoneOf(hot []*node) (off, n uint64) {
	hz := hot[hotIndex(hot)]
	return uint64Field(hz, "offset") - j.newOff, segmentSize(hz)
}

// post are the segments once the hotzone of hot is written.
func (j *reshiftJob) post(hot []*node) []*node {
	off, _ := j.hotzoneOf(hot)
	return j.segments(off, 0)
}

func (j *reshiftJob) loop(active []*node) error {
	if hotIndex(active) >= 0 {
		// The hotzone's source is intact: write it again.
		if err := j.rewrite(active); err != nil {
			return fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
		}
		active = j.post(active)
		if err := j.commit(j.rootWith(active)); err != nil {
			return err
		}
	}
	j.progress(active)
	_, done, err := hotzoneSteps{
		run:  j.run,
		left: func(active []*node) bool { return j.front(active) > 0 },
		hot: func(active []*node) ([]*node, error) {
			front := j.front(active)
			return j.segments(front, min(j.shift, front)), nil
		},
		protect:  func(hot []*node) error { return j.commit(j.rootWith(hot)) },
		rewrite:  j.rewrite,
		post:     j.post,
		commit:   func(active []*node) error { return j.commit(j.rootWith(active)) },
		progress: j.progress,
	}.loop(active)
	if err != nil || !done {
		return err
	}
	return j.finish()
}

func (j *reshiftJob) progress(active []*node) {
	if j.run.Progress != nil {
		j.run.Progress(int64(j.total-j.front(active)), int64(j.total))
	}
}

// rewrite reads the hotzone of hot at the old offset, rewrites it from
// the old cipher to the new and writes it at the new offset, durably.
func (j *reshiftJob) rewrite(hot []*node) error {
	off, n := j.hotzoneOf(hot)
	if n == 0 || n > j.shift || off+n > j.total {
		return fmt.Errorf("hotzone %d+%d is out of range", off, n)
	}
	b, free := hotzoneBuffer(int(n))
	defer free()
	oss, nss := int(int64Of(j.prev.get("sector_size"))), int(int64Of(j.final.get("sector_size")))
	err := rewritePieces(j.run.Data, b, int64(j.oldOff+off), int64(j.newOff+off), off, func(p []byte, lo int) {
		sector := (off + uint64(lo)) / 512
		j.old.Decrypt(p, sector, oss)
		j.new.Encrypt(p, sector, nss)
	})
	if err != nil {
		return err
	}
	if f, ok := j.run.Data.(interface{ Flush() error }); ok {
		err = f.Flush()
	} else {
		err = j.dev.Flush()
	}
	if err != nil {
		return fmt.Errorf("failed to sync data: %w", err)
	}
	return nil
}

// finish leaves the header cryptsetup leaves: the new segment alone at
// the new offset, the old keyslots, the reencrypt keyslot, their digests
// and the requirement gone, and the keyslots area grown up to the new
// data offset (at most 128 MiB, in whole 4096-byte units; a detached
// header file grows with it).
func (j *reshiftJob) finish() error {
	root, areas := j.h.finishedRoot(segmentNode(j.newOff, 0, 0, j.final.get("encryption").str,
		int(int64Of(j.final.get("sector_size")))), j.slot, j.oldD)
	root.get("digests").get(strconv.Itoa(j.newD.id)).set("segments", idsNode([]int{0}))
	var grow func() error
	if meta := uint64(2 * j.h.bin.hdrSize); j.newOff > meta {
		size := max(min(j.newOff-meta, maxKeyslotsSize)/keyslotsAlign*keyslotsAlign, j.h.meta.keyslotsSize)
		root.get("config").set("keyslots_size", jUint64Str(size))
		grow = func() error { return growTo(j.dev, int64(meta+size)) }
	}
	return j.h.commitFinished(j.dev, j.run.Commit, root, areas, grow)
}

// growTo makes dev (a detached header file) at least end bytes long, as
// cryptsetup extends a header file whose keyslots area grows: the new
// part reads as zeros. A device that long already is left alone.
func growTo(dev Device, end int64) error {
	b := make([]byte, 1)
	if _, err := dev.ReadAt(b, end-1); err == nil {
		return nil
	}
	if _, err := dev.WriteAt(b[:1:1], end-1); err != nil {
		return fmt.Errorf("cannot grow the header to %d bytes: %w", end, err)
	}
	return nil
}

// openReencryptShift is OpenReencrypting for a reencryption with a data
// shift: a hotzone a crash left is written again first (a recovery that
// ends the run finishes it), then the data still old is mapped at the
// old offset with the old key and the rest at the new offset with the
// new key, as cryptsetup's activation maps the segments.
func (h *header) openReencryptShift(dev Device, devSize int64, passphrase []byte, slot int, commit func(write func() error) error) (*ReencryptMapping, error) {
	j, err := h.reshiftState(dev, devSize, ReencryptRun{Commit: commit})
	if err != nil {
		return nil, err
	}
	oldCipher, oldSector := j.prev.get("encryption").str, int(int64Of(j.prev.get("sector_size")))
	newCipher, newSector := j.final.get("encryption").str, int(int64Of(j.final.get("sector_size")))
	for _, s := range []struct {
		cipher string
		sector int
	}{{oldCipher, oldSector}, {newCipher, newSector}} {
		if err := safeCipher(s.cipher); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		if !ValidSectorSize(2, s.sector) {
			return nil, fmt.Errorf("%w: sector size %d", ErrUnsupported, s.sector)
		}
	}
	newVK, newSlot, err := h.openDigestKeySlot(dev, j.newD, passphrase, slot)
	if err != nil {
		return nil, err
	}
	m := &ReencryptMapping{NewKey: newVK, Slot: newSlot,
		Final: Segment{Offset: int64(j.newOff), Cipher: newCipher, SectorSize: newSector, KeySize: len(newVK)}}
	finished := func() (*ReencryptMapping, error) {
		if err := j.finish(); err != nil {
			m.Wipe()
			return nil, err
		}
		clear(m.OldKey)
		m.OldKey = nil
		m.Segments = []MappedSegment{{Segment: m.Final, New: true}}
		return m, nil
	}
	active := activeSegments(h.meta.root)
	if j.front(active) == 0 && hotIndex(active) < 0 && len(j.oldD.keyslots) == 0 {
		return finished() // killed while it finished (see reencryptShift)
	}
	if m.OldKey, err = h.openDigestKey(dev, j.oldD, passphrase, slot); err != nil {
		m.Wipe()
		return nil, err
	}
	if err := j.verifyDigest(m.OldKey, newVK); err != nil {
		m.Wipe()
		return nil, err
	}
	if hotIndex(active) >= 0 {
		if active, err = j.recoverWith(active, m.OldKey, newVK); err != nil {
			m.Wipe()
			return nil, fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
		}
	}
	front := j.front(active)
	if front == 0 {
		return finished()
	}
	m.Segments = []MappedSegment{{Segment: Segment{Offset: int64(j.oldOff), Size: int64(front),
		Cipher: oldCipher, SectorSize: oldSector, KeySize: len(m.OldKey)}}}
	if front < j.total {
		m.Segments = append(m.Segments, MappedSegment{Segment: Segment{Offset: int64(j.newOff + front),
			Cipher: newCipher, SectorSize: newSector, KeySize: len(newVK)}, IVTweak: front / 512, New: true})
	}
	return m, nil
}

// recoverWith writes the hotzone of active again with ciphers made from
// the keys and commits the segments after it, which it returns.
func (j *reshiftJob) recoverWith(active []*node, oldVK, newVK []byte) ([]*node, error) {
	var err error
	if j.old, err = dmcrypt.New(j.prev.get("encryption").str, oldVK); err != nil {
		return nil, err
	}
	defer j.old.Wipe()
	if j.new, err = dmcrypt.New(j.final.get("encryption").str, newVK); err != nil {
		return nil, err
	}
	defer j.new.Wipe()
	if err := j.rewrite(active); err != nil {
		return nil, err
	}
	active = j.post(active)
	return active, j.commit(j.rootWith(active))
}
