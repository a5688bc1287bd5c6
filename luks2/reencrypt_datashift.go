package luks2

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/luksd/luksd/dmcrypt"
)

// Encryption in place with a data shift, as cryptsetup 2.6.1's reencrypt
// --encrypt --reduce-device-size runs it (mode "encrypt", direction
// "backward", resilience "datashift"). The plaintext's first shift bytes
// were copied to the device's end (the backup-moved-segment) before the
// header took their place; the rest is still where it was. Hotzones of
// shift bytes are encrypted from the end backward, each written shift
// bytes after where it is read, so a hotzone's source is never
// overwritten before the hotzone is committed: a crash is repaired by
// encrypting the hotzone again. The last hotzone (offset 0) is read from
// the moved copy. The segment lists follow cryptsetup's
// reencrypt_make_hot_segments_encrypt_shift and
// _enc_create_segments_shift_after.

// shiftJob is an encryption with datashift resilience being run.
type shiftJob struct {
	h      *header
	dev    Device
	run    ReencryptRun
	slot   int    // the reencrypt keyslot
	shift  uint64 // its shift_size
	offset uint64 // the data offset of the encrypted volume
	final  *node  // backup-final: the new segment
	prev   *node  // backup-previous: the plaintext, linear
	moved  *node  // backup-moved-segment: the plaintext's first part
	total  uint64 // plaintext bytes (backup-previous's size)
	// devSize is the device's size: cryptsetup counts progress to the end
	// of the device, the moved copy included.
	devSize uint64
	digest  *digest
	enc     dmcrypt.SectorCipher
}

// reencryptArea reads the reencrypt keyslot's mode, direction and area
// type ("" without one).
func reencryptArea(root *node) (mode, direction, area string) {
	ks := reencryptKeyslotNode(root)
	if ks == nil {
		return "", "", ""
	}
	return ks.get("mode").str, ks.get("direction").str, ks.get("area").get("type").str
}

// isEncryptShift reports whether the reencryption is an encryption with
// datashift resilience.
func isEncryptShift(root *node) bool {
	mode, dir, area := reencryptArea(root)
	return mode == "encrypt" && dir == "backward" && area == "datashift"
}

// shiftState reads the metadata of an encryption with a data shift.
func (h *header) shiftState(dev Device) (*shiftJob, error) {
	root := h.meta.root
	ks := reencryptKeyslotNode(root)
	j := &shiftJob{h: h, dev: dev}
	for id, k := range h.meta.keyslots {
		if k.obj == ks {
			j.slot = id
		}
	}
	j.shift = uint64Field(ks.get("area"), "shift_size")
	j.final = segmentByFlag(root, "backup-final")
	j.prev = segmentByFlag(root, "backup-previous")
	j.moved = segmentByFlag(root, "backup-moved-segment")
	if j.shift == 0 || j.shift%512 != 0 || j.final == nil || j.prev == nil || j.moved == nil ||
		j.final.get("type").str != "crypt" || j.prev.get("type").str != "linear" || j.moved.get("type").str != "linear" {
		return nil, fmt.Errorf("%w: encryption segments", ErrReencryptInvalid)
	}
	j.offset, j.total = uint64Field(j.final, "offset"), segmentSize(j.prev)
	for id, s := range h.meta.segments {
		if slicesContains(s.flags, "backup-final") {
			j.digest = h.meta.segmentDigest(id)
		}
	}
	if j.digest == nil || j.total == 0 || segmentSize(j.moved) == 0 || segmentSize(j.moved) > j.shift {
		return nil, fmt.Errorf("%w: encryption segments", ErrReencryptInvalid)
	}
	return j, nil
}

// encryptShift runs (or resumes) the encryption on dev.
func (h *header) encryptShift(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) error {
	j, vk, _, err := h.shiftJobFor(dev, devSize, passphrase, slot, run)
	if err != nil {
		return err
	}
	defer clear(vk)
	defer j.enc.Wipe()
	return j.loop()
}

// shiftJobFor reads the encryption's state and opens the new volume key
// with passphrase (keyslot slot, or any with -1), checking the
// reencryption digest with it. It returns the job, its cipher made, the
// key and the keyslot that opened it; the caller wipes both.
func (h *header) shiftJobFor(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) (*shiftJob, []byte, int, error) {
	j, err := h.shiftState(dev)
	if err != nil {
		return nil, nil, -1, err
	}
	if uint64(devSize) < j.offset+j.total+j.shift {
		return nil, nil, -1, ErrDeviceTooSmall
	}
	j.run, j.devSize = run, uint64(devSize)
	if j.run.Data == nil {
		j.run.Data = dev
	}
	if j.run.Commit == nil {
		j.run.Commit = func(write func() error) error { return write() }
	}
	vk, got, err := h.openDigestKeySlot(dev, j.digest, passphrase, slot)
	if err != nil {
		return nil, nil, -1, err
	}
	if err := j.verifyDigest(vk); err != nil {
		clear(vk)
		return nil, nil, -1, err
	}
	if j.enc, err = dmcrypt.New(j.final.get("encryption").str, vk); err != nil {
		clear(vk)
		return nil, nil, -1, err
	}
	return j, vk, got, nil
}

// verifyDigest checks the reencryption digest with the new volume key.
func (j *shiftJob) verifyDigest(vk []byte) error {
	return j.h.checkReencryptDigest(j.slot, reencryptVersion, nil, vk, ErrReencryptInvalid)
}

// activeSegments are the data segments of root in order, backups left out.
func activeSegments(root *node) []*node {
	segs := root.get("segments")
	ids := make([]int, 0, len(segs.keys))
	for _, k := range segs.keys {
		if id, err := strconv.Atoi(k); err == nil && !segmentFlag(segs.get(k), "backup-", true) {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	out := make([]*node, len(ids))
	for i, id := range ids {
		out[i] = segs.get(strconv.Itoa(id))
	}
	return out
}

// remaining is the plaintext not yet encrypted: the linear segments' sizes.
func remaining(active []*node) uint64 {
	var n uint64
	for _, s := range active {
		if s.get("type").str == "linear" {
			n += segmentSize(s)
		}
	}
	return n
}

// hotIndex is the index of the in-reencryption segment, or -1.
func hotIndex(active []*node) int {
	for i, s := range active {
		if segmentFlag(s, "in-reencryption", false) {
			return i
		}
	}
	return -1
}

// next is the next hotzone (cryptsetup's reencrypt_offset_backward_moved):
// the last shift bytes of what is left, the moved part last.
func (j *shiftJob) next(active []*node) (off, n uint64, err error) {
	left := remaining(active)
	if len(active) == 1 {
		return 0, j.shift, nil
	}
	if left < j.shift {
		return 0, 0, fmt.Errorf("%w: %d bytes left to encrypt, less than the shift", ErrReencryptInvalid, left)
	}
	tmp := left - j.shift
	if tmp > 0 && tmp < j.shift {
		return j.shift, tmp, nil
	}
	return tmp, j.shift, nil
}

// hotSegments are the segments while the hotzone [off, off+n) is written.
func (j *shiftJob) hotSegments(active []*node, off, n uint64) []*node {
	lastLinear, firstCrypt := -1, -1
	for i, s := range active {
		switch s.get("type").str {
		case "linear":
			lastLinear = i
		case "crypt":
			if firstCrypt < 0 {
				firstCrypt = i
			}
		}
	}
	var hot []*node
	for _, s := range active[:lastLinear] {
		hot = append(hot, s.clone())
	}
	if size := segmentSize(active[lastLinear]); size > n {
		shrunk := active[lastLinear].clone()
		shrunk.set("size", jUint64Str(size-n))
		hot = append(hot, shrunk)
	}
	hot = append(hot, segmentNode(j.offset+off, n, off/512, j.final.get("encryption").str,
		int(int64Of(j.final.get("sector_size"))), "in-reencryption"))
	if firstCrypt >= 0 {
		hot = append(hot, active[firstCrypt].clone())
	}
	return hot
}

// postSegments are the segments once the hotzone of hot is written: it
// joins the encrypted segment after it, which becomes dynamic when
// nothing is left before it.
func (j *shiftJob) postSegments(hot []*node) []*node {
	r := hotIndex(hot)
	hz := hot[r]
	off, n := uint64Field(hz, "offset")-j.offset, segmentSize(hz)
	post := append([]*node(nil), hot[:r]...)
	var joined *node
	if r+1 < len(hot) {
		joined = hot[r+1].clone()
		joined.set("offset", jUint64Str(j.offset+off))
		joined.set("iv_tweak", jUint64Str(off/512))
		joined.set("size", jUint64Str(segmentSize(joined)+n))
	} else {
		joined = hz.clone()
		joined.del("flags")
	}
	if r == 0 {
		joined.set("size", jString("dynamic"))
	}
	return append(post, joined)
}

// rootWith is the metadata with the data segments active, then the
// backups, bound to the new key's digest as cryptsetup binds them.
func (j *shiftJob) rootWith(active []*node) *node {
	root := j.h.meta.root.clone()
	segs := jObject()
	ids := []int{len(active) + 1} // backup-final
	for i, s := range active {
		segs.set(strconv.Itoa(i), s)
		if s.get("type").str == "crypt" {
			ids = append(ids, i)
		}
	}
	for i, b := range []*node{j.prev, j.final, j.moved} {
		segs.set(strconv.Itoa(len(active)+i), b.clone())
	}
	root.set("segments", segs)
	digests := root.get("digests")
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	digests.get(strconv.Itoa(j.digest.id)).set("segments", idsNode(ids))
	return root
}

func (j *shiftJob) commit(root *node) error {
	return j.run.Commit(func() error { return j.h.replace(j.dev, root) })
}

// recover encrypts again the hotzone a crash left half written (its
// source is intact) and commits the segments after it; it returns the
// data segments.
func (j *shiftJob) recover(buf []byte) ([]*node, error) {
	active := activeSegments(j.h.meta.root)
	if hotIndex(active) < 0 {
		return active, nil
	}
	if err := j.encryptHotzone(active, buf); err != nil {
		return nil, fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
	}
	active = j.postSegments(active)
	return active, j.commit(j.rootWith(active))
}

func (j *shiftJob) loop() error {
	buf, free := hotzoneBuffer(int(j.shift))
	defer free()
	active, err := j.recover(buf)
	if err != nil {
		return err
	}
	j.progress(active)
	active, done, err := hotzoneSteps{
		run:  j.run,
		left: func(active []*node) bool { return remaining(active) > 0 },
		hot: func(active []*node) ([]*node, error) {
			off, n, err := j.next(active)
			if err != nil {
				return nil, err
			}
			return j.hotSegments(active, off, n), nil
		},
		protect:  func(hot []*node) error { return j.commit(j.rootWith(hot)) },
		rewrite:  func(hot []*node) error { return j.encryptHotzone(hot, buf) },
		post:     j.postSegments,
		commit:   func(active []*node) error { return j.commit(j.rootWith(active)) },
		progress: j.progress,
	}.loop(active)
	if err != nil || !done {
		return err
	}
	return j.finish(active)
}

// hotzoneSteps are the steps of a reencryption with a data shift, one
// hotzone at a time: its segments (hot), its resilience data and hot
// segments committed (protect), its data rewritten (rewrite), the segments
// after it (post) committed (commit).
type hotzoneSteps struct {
	run      ReencryptRun
	left     func(active []*node) bool
	hot      func(active []*node) ([]*node, error)
	protect  func(hot []*node) error
	rewrite  func(hot []*node) error
	post     func(hot []*node) []*node
	commit   func(active []*node) error
	progress func(active []*node)
}

// loop runs the steps from the data segments active until nothing is
// left (done) or run.Stop asks; it returns the data segments.
func (s hotzoneSteps) loop(active []*node) ([]*node, bool, error) {
	for s.left(active) {
		if s.run.Stop != nil && s.run.Stop() {
			return active, false, nil
		}
		hot, err := s.hot(active)
		if err != nil {
			return nil, false, err
		}
		if err := s.protect(hot); err != nil {
			return nil, false, fmt.Errorf("failed to write reencryption resilience metadata: %w", err)
		}
		if err := s.rewrite(hot); err != nil {
			return nil, false, err
		}
		active = s.post(hot)
		if err := s.commit(active); err != nil {
			return nil, false, fmt.Errorf("failed to update metadata after current reencryption hotzone completed: %w", err)
		}
		s.progress(active)
	}
	return active, true, nil
}

func (j *shiftJob) progress(active []*node) {
	if j.run.Progress != nil {
		total := j.devSize - j.offset
		j.run.Progress(int64(total-min(total, remaining(active))), int64(total))
	}
}

// encryptHotzone encrypts the hotzone of hot from its source (shift bytes
// before it, or the moved copy for the first) to its place, durably.
func (j *shiftJob) encryptHotzone(hot []*node, buf []byte) error {
	hz := hot[hotIndex(hot)]
	off, n := uint64Field(hz, "offset")-j.offset, segmentSize(hz)
	if n == 0 || n > uint64(len(buf)) || off > j.offset+j.total {
		return fmt.Errorf("hotzone %d+%d is out of range", off, n)
	}
	src := j.offset + off - j.shift
	if off == 0 {
		src = uint64Field(j.moved, "offset")
	}
	// The hotzone is at most a shift long, so its source and its place
	// do not overlap.
	sectorSize := int(int64Of(j.final.get("sector_size")))
	err := rewritePieces(j.run.Data, buf[:n], int64(src), int64(j.offset+off), off, func(p []byte, lo int) {
		j.enc.Encrypt(p, (off+uint64(lo))/512, sectorSize)
	})
	if err != nil {
		return err
	}
	if err := j.dev.Flush(); err != nil {
		return fmt.Errorf("failed to sync data: %w", err)
	}
	return nil
}

// finish wipes the moved copy of the plaintext and leaves the header
// cryptsetup leaves: the encrypted segment alone, without the reencrypt
// keyslot, its digest and the requirement.
func (j *shiftJob) finish(active []*node) error {
	if len(active) != 1 || active[0].get("type").str != "crypt" {
		return errors.New("encryption ended with segments left")
	}
	root := j.rootWith(active)
	segs := jObject()
	segs.set("0", active[0])
	root.set("segments", segs)
	root.get("keyslots").del(strconv.Itoa(j.slot))
	if d := j.h.meta.keyslotDigest(j.slot); d != nil {
		root.get("digests").del(strconv.Itoa(d.id))
	}
	root.get("digests").get(strconv.Itoa(j.digest.id)).set("segments", idsNode([]int{0}))
	removeRequirement(root, reencryptFlag)
	ks := j.h.meta.keyslots[j.slot]
	return j.run.Commit(func() error {
		if err := wipeArea(j.run.Data, uint64Field(j.moved, "offset"), segmentSize(j.moved)); err != nil {
			return err
		}
		if err := flush(j.dev); err != nil {
			return err
		}
		if err := j.h.replace(j.dev, root); err != nil {
			return err
		}
		if err := wipeArea(j.dev, ks.areaOffset, ks.areaSize); err != nil {
			return err
		}
		return flush(j.dev)
	})
}

// openEncryptShift is OpenReencrypting for an encryption with a data
// shift: the data segments as cryptsetup's activation maps them, the
// plaintext ones linear, after a crashed hotzone is recovered (a recovery
// that ends the encryption finishes it).
func (h *header) openEncryptShift(dev Device, devSize int64, passphrase []byte, slot int, commit func(write func() error) error) (*ReencryptMapping, error) {
	j, vk, got, err := h.shiftJobFor(dev, devSize, passphrase, slot, ReencryptRun{Commit: commit})
	if err != nil {
		return nil, err
	}
	defer j.enc.Wipe()
	m := &ReencryptMapping{NewKey: vk, Slot: got}
	m.Final = Segment{Offset: int64(j.offset), Cipher: j.final.get("encryption").str,
		SectorSize: int(int64Of(j.final.get("sector_size"))), KeySize: len(vk)}
	buf := make([]byte, j.shift)
	active, err := j.recover(buf)
	clear(buf)
	if err == nil && remaining(active) == 0 {
		err = j.finish(active)
	}
	if err != nil {
		m.Wipe()
		return nil, err
	}
	for _, s := range active {
		seg := Segment{Offset: int64(uint64Field(s, "offset")), Size: int64(segmentSize(s))}
		if s.get("type").str == "linear" {
			m.Segments = append(m.Segments, MappedSegment{Segment: seg, Linear: true})
			continue
		}
		seg.Cipher, seg.SectorSize, seg.KeySize = m.Final.Cipher, m.Final.SectorSize, len(vk)
		m.Segments = append(m.Segments, MappedSegment{Segment: seg, IVTweak: uint64Field(s, "iv_tweak"), New: true})
	}
	return m, nil
}
