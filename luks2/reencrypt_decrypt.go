package luks2

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"

	"github.com/luksd/luksd/dmcrypt"
)

// Decryption in place with a data shift, as cryptsetup 2.6.1's reencrypt
// --decrypt --header NEWFILE runs it on a volume whose header is on the
// data device (mode "decrypt", direction "forward", resilience
// "datashift-checksum" or "datashift-journal", requirement
// online-reencrypt-v3). The header goes to NEWFILE; the plaintext ends at
// offset 0 of the data device, shift (the old data offset) bytes before
// its ciphertext. At init the first moved bytes of ciphertext are copied
// to offset 0 (the backup-moved-segment); then hotzones of shift bytes
// are decrypted from the moved end forward, each written shift bytes
// before where it is read, so a crash is repaired by decrypting it again;
// last, the moved part is decrypted in place under the checksum (or
// journal) protection the area's type names. The segment lists follow
// cryptsetup's reencrypt_make_hot_segments_decrypt_shift and
// _dec_create_segments_shift_after.

// DecryptParams are the choices of a new decryption with a data shift.
type DecryptParams struct {
	// Resilience protects the moved part: "checksum" (default) or
	// "journal".
	Resilience string
	Hash       string // checksum hash (default sha256)
	// MovedSize is the ciphertext moved to offset 0 at init (cryptsetup's
	// --hotzone-size; 0 = the shift, at most 20 MiB).
	MovedSize int64
	// BlockSize is the data device's block size (cryptsetup's alignment
	// floor; 4096 for an image file): the checksum sector size is the
	// largest of it and the volume's sector size.
	BlockSize int
}

// defaultMovedSize is cryptsetup's LUKS2_DEFAULT_NONE_REENCRYPTION_LENGTH.
const defaultMovedSize = 20 << 20

// decryptShiftVersion is the online-reencrypt-vN requirement of a
// decryption with a data shift (LUKS2_DECRYPT_DATASHIFT_REQ_VERSION).
const decryptShiftVersion = 3

var (
	// ErrMovedTooLarge: the moved part does not fit the resilience area
	// (cryptsetup's "Moved segment too large. ...").
	ErrMovedTooLarge = errors.New("moved segment too large")
	// ErrMovedOverShift: the moved part asked for is larger than the
	// shift ("Moved segment size can not be greater than data shift
	// value.").
	ErrMovedOverShift = errors.New("moved segment size can not be greater than data shift value")
)

// DecryptExportSize is the size of the header NEWFILE gets: both binary
// headers, the JSON areas and the keyslots area.
func (h *Header) DecryptExportSize() int64 {
	v2, ok := h.v2()
	if !ok {
		return 0
	}
	return v2.headerSize()
}

// DecryptInit starts decrypting the volume on data (devSize bytes, header
// attached) as cryptsetup's reencrypt --decrypt --header NEWFILE does:
// the header is copied to newHdr (an empty file DecryptExportSize bytes
// long), checked to open with passphrase (keyslot slot, or any with -1),
// the LUKS signatures on data are wiped, the moved ciphertext copied to
// offset 0, and the reencryption metadata written to newHdr. When it
// fails after data was touched, the header is put back on data.
func (h *Header) DecryptInit(data, newHdr Device, devSize int64, passphrase []byte, slot int, p DecryptParams) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 decryption", ErrUnsupported)
	}
	if err := v2.requirementsMet(); errors.Is(err, ErrReencryption) {
		return ErrReencryptionInitialized
	} else if err != nil {
		return err
	}
	size := v2.headerSize()
	saved := make([]byte, size)
	if _, err := data.ReadAt(saved, 0); err != nil {
		return fmt.Errorf("failed to read the header: %w", err)
	}
	if _, err := newHdr.WriteAt(saved, 0); err != nil {
		return err
	}
	if err := flush(newHdr); err != nil {
		return err
	}
	exported, err := Read(newHdr, size)
	if err != nil {
		return err
	}
	e2, _ := exported.v2()
	root, oldVK, moved, err := e2.decryptShiftMetadata(newHdr, devSize, passphrase, slot, p)
	if err != nil {
		return err
	}
	defer clear(oldVK)
	if err := moveCiphertext(data, v2, saved, moved); err != nil {
		if _, err := data.WriteAt(saved, 0); err == nil {
			data.Flush()
		}
		return err
	}
	if err := e2.replace(newHdr, root); err != nil {
		if _, err := data.WriteAt(saved, 0); err == nil {
			data.Flush()
		}
		return err
	}
	return nil
}

// moveCiphertext wipes the LUKS2 magics on data and copies the first
// moved bytes of ciphertext to offset 0, durably.
func moveCiphertext(data Device, h *header, saved []byte, moved uint64) error {
	shift := h.meta.segments[0].offset
	for _, off := range []int64{0, h.bin.hdrSize} {
		if _, err := data.WriteAt(make([]byte, len(magic1)), off); err != nil {
			return err
		}
	}
	buf := make([]byte, moved)
	defer clear(buf)
	if _, err := data.ReadAt(buf, int64(shift)); err != nil {
		return fmt.Errorf("failed to read data at offset %d: %w", shift, err)
	}
	if _, err := data.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("failed to write data at offset 0: %w", err)
	}
	return data.Flush()
}

// decryptShiftMetadata is the metadata of a decryption with a data shift
// starting, the old volume key that opened (checked with passphrase) and
// the moved size.
func (h *header) decryptShiftMetadata(dev Device, devSize int64, passphrase []byte, slot int, p DecryptParams) (*node, []byte, uint64, error) {
	old, err := h.meta.dataSegment()
	if err != nil {
		return nil, nil, 0, err
	}
	if old.typ != "crypt" || old.ivTweak != 0 || old.size != 0 || old.offset == 0 {
		return nil, nil, 0, fmt.Errorf("%w: segment 0 is not a dynamic crypt segment after the header", ErrReencryptUnsupported)
	}
	shift := old.offset
	if uint64(devSize) <= shift {
		return nil, nil, 0, ErrDeviceTooSmall
	}
	dataSize := uint64(devSize) - shift
	if p.Resilience == "" {
		p.Resilience = "checksum"
	}
	if p.Hash == "" {
		p.Hash = "sha256"
	}
	block := max(p.BlockSize, old.sectorSize, 512)
	moved := uint64(p.MovedSize)
	if moved > shift {
		return nil, nil, 0, ErrMovedOverShift
	}
	if moved == 0 {
		moved = min(shift, defaultMovedSize)
	}
	moved = min(moved, dataSize)
	if moved%uint64(old.sectorSize) != 0 {
		return nil, nil, 0, fmt.Errorf("hotzone size must be multiple of calculated zone alignment (%d bytes)", old.sectorSize)
	}
	d := h.meta.segmentDigest(old.id)
	vk, err := h.openDigestKey(dev, d, passphrase, slot)
	if err != nil {
		return nil, nil, 0, err
	}
	fail := func(err error) (*node, []byte, uint64, error) {
		clear(vk)
		return nil, nil, 0, err
	}
	reSlot, err := h.freeSlotExcept(map[int]bool{})
	if err != nil {
		return fail(err)
	}
	areaOff, areaSize := h.maxAreaGap()
	area := obj("offset", jUint64Str(areaOff), "size", jUint64Str(areaSize))
	var room uint64
	switch p.Resilience {
	case "checksum":
		if _, err := hashFunc(p.Hash); err != nil {
			return fail(err)
		}
		area.set("type", jString("datashift-checksum"))
		area.set("hash", jString(p.Hash))
		area.set("sector_size", jInt(int64(block)))
		room = areaSize / uint64(hashSize(p.Hash)) * uint64(block)
	case "journal":
		area.set("type", jString("datashift-journal"))
		room = areaSize
	default:
		return fail(fmt.Errorf("unsupported resilience mode %s", p.Resilience))
	}
	area.set("shift_size", jUint64Str(shift))
	if moved > room {
		return fail(fmt.Errorf("%w. Requested size %d, available space for: %d", ErrMovedTooLarge, moved, room))
	}
	root := h.meta.root.clone()
	root.get("keyslots").set(strconv.Itoa(reSlot), obj("area", area, "type", jString("reencrypt"), "key_size", jInt(1),
		"mode", jString("decrypt"), "direction", jString("forward"), "priority", jInt(0)))
	first := segmentNode(0, moved, 0, old.cipher, old.sectorSize)
	segs := []*node{first}
	if dataSize > moved {
		segs = append(segs, segmentNode(shift+moved, 0, moved/512, old.cipher, old.sectorSize))
	}
	movedNode := first.clone()
	withFlags(movedNode, []string{"backup-moved-segment"})
	segs = append(segs, movedNode, segmentNode(shift, 0, 0, old.cipher, old.sectorSize, "backup-previous"),
		linearSegment(0, 0, "backup-final"))
	sn := jObject()
	var ids []int
	for i, s := range segs {
		sn.set(strconv.Itoa(i), s)
		if s.get("type").str == "crypt" {
			ids = append(ids, i)
		}
	}
	root.set("segments", sn)
	digests := root.get("digests")
	digests.get(strconv.Itoa(d.id)).set("segments", idsNode(ids))
	addRequirement(root, "online-reencrypt-v"+strconv.Itoa(decryptShiftVersion))
	vdata, err := reencryptVerificationData(root, decryptShiftVersion, vk, nil)
	if err != nil {
		return fail(err)
	}
	defer clear(vdata)
	rd, err := newDigestNode(vdata, "sha256", minPBKDF2Iterations, []int{reSlot}, nil)
	if err != nil {
		return fail(err)
	}
	digests.set(strconv.Itoa(h.freeDigestIDs(1)[0]), rd)
	return root, vk, moved, nil
}

// linearSegment is a linear segment object in cryptsetup's field order;
// size 0 is "dynamic".
func linearSegment(offset, size uint64, flags ...string) *node {
	if size == 0 {
		return withFlags(obj("type", jString("linear"), "offset", jUint64Str(offset), "size", jString("dynamic")), flags)
	}
	return linearNode(offset, size, flags...)
}

// isDecryptShift reports whether the reencryption is a decryption with a
// data shift.
func isDecryptShift(root *node) bool {
	mode, dir, area := reencryptArea(root)
	return mode == "decrypt" && dir == "forward" && (area == "datashift-checksum" || area == "datashift-journal")
}

// decryptJob is a decryption with a data shift being run.
type decryptJob struct {
	h          *header
	dev        Device // the header
	run        ReencryptRun
	slot       int    // the reencrypt keyslot
	shift      uint64 // its shift_size
	resilience string // the moved part's: "checksum" or "journal"
	hash       string
	blockSize  int
	areaOffset uint64
	areaSize   uint64
	prev       *node // backup-previous: the ciphertext, at shift
	final      *node // backup-final: the plaintext, linear at 0
	moved      *node // backup-moved-segment: the ciphertext moved to 0
	total      uint64
	digest     *digest // the old key's
	cipher     string
	sectorSize int
	dec        dmcrypt.SectorCipher
}

// decryptState reads the metadata of a decryption with a data shift;
// devSize is the data device's size.
func (h *header) decryptState(dev Device, devSize int64) (*decryptJob, error) {
	root := h.meta.root
	ks := reencryptKeyslotNode(root)
	j := &decryptJob{h: h, dev: dev}
	for id, k := range h.meta.keyslots {
		if k.obj == ks {
			j.slot = id
		}
	}
	area := ks.get("area")
	j.shift = uint64Field(area, "shift_size")
	j.areaOffset, j.areaSize = uint64Field(area, "offset"), uint64Field(area, "size")
	if area.get("type").str == "datashift-checksum" {
		j.resilience, j.hash, j.blockSize = "checksum", area.get("hash").str, int(int64Of(area.get("sector_size")))
		if _, err := hashFunc(j.hash); err != nil {
			return nil, err
		}
	} else {
		j.resilience = "journal"
	}
	j.prev = segmentByFlag(root, "backup-previous")
	j.final = segmentByFlag(root, "backup-final")
	j.moved = segmentByFlag(root, "backup-moved-segment")
	bad := fmt.Errorf("%w: decryption segments", ErrReencryptInvalid)
	if j.prev == nil || j.final == nil || j.moved == nil || j.prev.get("type").str != "crypt" ||
		j.final.get("type").str != "linear" || j.moved.get("type").str != "crypt" ||
		uint64Field(j.final, "offset") != 0 || uint64Field(j.moved, "offset") != 0 ||
		uint64Field(j.prev, "offset") != j.shift || segmentSize(j.prev) != 0 || j.shift == 0 {
		return nil, bad
	}
	j.cipher, j.sectorSize = j.prev.get("encryption").str, int(int64Of(j.prev.get("sector_size")))
	if uint64(devSize) <= j.shift {
		return nil, ErrDeviceTooSmall
	}
	j.total = uint64(devSize) - j.shift
	if m := segmentSize(j.moved); m == 0 || m > j.shift || m > j.total || m%512 != 0 {
		return nil, bad
	}
	for id, s := range h.meta.segments {
		if slicesContains(s.flags, "backup-previous") {
			j.digest = h.meta.segmentDigest(id)
		}
	}
	if j.digest == nil {
		return nil, bad
	}
	return j, nil
}

// decryptJobFor reads the decryption's state and opens the old volume
// key with passphrase, checking the reencryption digest with it; the
// caller wipes j.dec.
func (h *header) decryptJobFor(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) (*decryptJob, error) {
	j, err := h.decryptState(dev, devSize)
	if err != nil {
		return nil, err
	}
	j.run = run
	if j.run.Data == nil {
		j.run.Data = dev
	}
	if j.run.Commit == nil {
		j.run.Commit = func(write func() error) error { return write() }
	}
	vk, err := h.openDigestKey(dev, j.digest, passphrase, slot)
	if err != nil {
		return nil, err
	}
	defer clear(vk)
	if err := h.checkReencryptDigest(j.slot, decryptShiftVersion, vk, nil, ErrReencryptInvalid); err != nil {
		return nil, err
	}
	if j.dec, err = dmcrypt.New(j.cipher, vk); err != nil {
		return nil, err
	}
	return j, nil
}

// decryptShift runs (or resumes) the decryption; dev holds the header,
// run.Data (or dev) the data, devSize bytes.
func (h *header) decryptShift(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) error {
	j, err := h.decryptJobFor(dev, devSize, passphrase, slot, run)
	if err != nil {
		return err
	}
	defer j.dec.Wipe()
	return j.loop()
}

// lastCrypt is the index of the last crypt segment of active, or -1.
func lastCrypt(active []*node) int {
	last := -1
	for i, s := range active {
		if s.get("type").str == "crypt" {
			last = i
		}
	}
	return last
}

// next is the next hotzone (cryptsetup's reencrypt_offset_forward_moved):
// the ciphertext after the moved part first, the moved part last.
func (j *decryptJob) next(active []*node) (off, n uint64) {
	last := lastCrypt(active)
	if last <= 0 {
		return 0, segmentSize(j.moved)
	}
	off = uint64Field(active[last], "offset") - j.shift
	return off, min(j.shift, j.total-off)
}

// hotSegments are the segments while the hotzone [off, off+n) is written.
func (j *decryptJob) hotSegments(active []*node, off, n uint64) []*node {
	var hot []*node
	m := segmentSize(j.moved)
	if off > 0 {
		hot = append(hot, active[0].clone())
		if done := off - m; done > 0 {
			hot = append(hot, linearNode(m, done))
		}
	}
	hot = append(hot, linearNode(off, n, "in-reencryption"))
	switch {
	case off == 0 && len(active) > 1:
		hot = append(hot, active[1].clone())
	case off > 0 && off+n < j.total:
		hot = append(hot, segmentNode(j.shift+off+n, 0, (off+n)/512, j.cipher, j.sectorSize))
	}
	return hot
}

// postSegments are the segments once the hotzone of hot is written.
func (j *decryptJob) postSegments(hot []*node) []*node {
	r := hotIndex(hot)
	if r == 0 {
		return []*node{linearSegment(0, 0)}
	}
	m := segmentSize(j.moved)
	hz := hot[r]
	off, n := uint64Field(hz, "offset"), segmentSize(hz)
	post := []*node{hot[0].clone()}
	if r+1 < len(hot) {
		post = append(post, linearNode(m, off+n-m), hot[r+1].clone())
	} else {
		post = append(post, linearSegment(m, 0))
	}
	return post
}

// rootWith is the metadata with the data segments active, then the
// backups, bound to the old key's digest as cryptsetup binds them.
func (j *decryptJob) rootWith(active []*node) *node {
	root := j.h.meta.root.clone()
	segs := jObject()
	n := len(active)
	ids := []int{n, n + 2} // backup-previous, backup-moved-segment
	for i, s := range active {
		segs.set(strconv.Itoa(i), s)
	}
	for i, b := range []*node{j.prev, j.final, j.moved} {
		segs.set(strconv.Itoa(n+i), b.clone())
	}
	for i, s := range active {
		if s.get("type").str == "crypt" {
			ids = append(ids, i)
		}
	}
	root.set("segments", segs)
	digests := root.get("digests")
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	digests.get(strconv.Itoa(j.digest.id)).set("segments", idsNode(ids))
	return root
}

func (j *decryptJob) commit(root *node) error {
	return j.run.Commit(func() error { return j.h.replace(j.dev, root) })
}

// syncData makes the data written durable.
func (j *decryptJob) syncData() error {
	if f, ok := j.run.Data.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return j.dev.Flush()
}

// source is where the ciphertext of the hotzone at off lies.
func (j *decryptJob) source(off uint64) uint64 {
	if off == 0 {
		return uint64Field(j.moved, "offset")
	}
	return j.shift + off
}

func (j *decryptJob) loop() error {
	buf, free := hotzoneBuffer(int(j.shift))
	defer free()
	active := activeSegments(j.h.meta.root)
	if r := hotIndex(active); r >= 0 {
		if err := j.recover(active, buf); err != nil {
			return fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
		}
		active = j.postSegments(active)
		if err := j.commit(j.rootWith(active)); err != nil {
			return err
		}
	}
	j.progress(active)
	var off uint64
	var b []byte // the hotzone's ciphertext
	active, done, err := hotzoneSteps{
		run:  j.run,
		left: func(active []*node) bool { return lastCrypt(active) >= 0 },
		hot: func(active []*node) ([]*node, error) {
			var n uint64
			off, n = j.next(active)
			b = buf[:n]
			if _, err := j.run.Data.ReadAt(b, int64(j.source(off))); err != nil {
				return nil, fmt.Errorf("failed to read hotzone area starting at %d: %w", off, err)
			}
			return j.hotSegments(active, off, n), nil
		},
		protect:  func(hot []*node) error { return j.protect(j.rootWith(hot), off, b) },
		rewrite:  func([]*node) error { return j.decrypt(b, off) },
		post:     j.postSegments,
		commit:   func(active []*node) error { return j.commit(j.rootWith(active)) },
		progress: j.progress,
	}.loop(active)
	if err != nil || !done {
		return err
	}
	return j.finish(active)
}

// protect commits the hot segments; for the moved part it first stores
// the checksums of its ciphertext, or the ciphertext, in the area.
func (j *decryptJob) protect(root *node, off uint64, raw []byte) error {
	if off != 0 {
		return j.commit(root)
	}
	data := raw
	if j.resilience == "checksum" {
		data = checksums(raw, j.blockSize, j.hash)
	}
	if uint64(len(data)) > j.areaSize {
		return fmt.Errorf("%d bytes of resilience data exceed the area", len(data))
	}
	return j.run.Commit(func() error {
		return j.h.store(j.dev, root, func() error {
			_, err := j.dev.WriteAt(data, int64(j.areaOffset))
			return err
		})
	})
}

// decrypt decrypts b, the ciphertext of data offset off, and writes it
// there, durably.
func (j *decryptJob) decrypt(b []byte, off uint64) error {
	onPieces(len(b), 1<<20, func(lo, hi int) {
		j.dec.Decrypt(b[lo:hi], (off+uint64(lo))/512, j.sectorSize)
	})
	if _, err := j.run.Data.WriteAt(b, int64(off)); err != nil {
		return fmt.Errorf("failed to write hotzone area starting at %d: %w", off, err)
	}
	if err := j.syncData(); err != nil {
		return fmt.Errorf("failed to sync data: %w", err)
	}
	return nil
}

// recover decrypts again the hotzone a crash left half written: from its
// source, intact, after the moved part; the moved part in place, block
// by block where the checksum says the ciphertext is still there, or all
// of it from the journal.
func (j *decryptJob) recover(hot []*node, buf []byte) error {
	hz := hot[hotIndex(hot)]
	off, n := uint64Field(hz, "offset"), segmentSize(hz)
	if n == 0 || n > uint64(len(buf)) || off+n > j.total {
		return fmt.Errorf("hotzone %d+%d is out of range", off, n)
	}
	b := buf[:n]
	if off != 0 {
		if _, err := j.run.Data.ReadAt(b, int64(j.source(off))); err != nil {
			return fmt.Errorf("failed to read data: %w", err)
		}
		return j.decrypt(b, off)
	}
	if j.resilience == "journal" {
		if n > j.areaSize {
			return fmt.Errorf("invalid journal size %d", n)
		}
		if _, err := j.dev.ReadAt(b, int64(j.areaOffset)); err != nil {
			return fmt.Errorf("failed to read journaled data: %w", err)
		}
		return j.decrypt(b, 0)
	}
	hs, bs := hashSize(j.hash), j.blockSize
	count := int(n) / bs
	sums := make([]byte, count*hs)
	if uint64(len(sums)) > j.areaSize {
		return fmt.Errorf("checksums of %d bytes exceed the area", len(sums))
	}
	if _, err := j.dev.ReadAt(sums, int64(j.areaOffset)); err != nil {
		return fmt.Errorf("failed to read checksums for current hotzone: %w", err)
	}
	if _, err := j.run.Data.ReadAt(b, 0); err != nil {
		return fmt.Errorf("failed to read hotzone area starting at 0: %w", err)
	}
	now := checksums(b, bs, j.hash)
	for i := range count {
		if string(now[i*hs:(i+1)*hs]) != string(sums[i*hs:(i+1)*hs]) {
			continue
		}
		blk := b[i*bs : (i+1)*bs]
		j.dec.Decrypt(blk, uint64(i*bs)/512, j.sectorSize)
		if _, err := j.run.Data.WriteAt(blk, int64(i*bs)); err != nil {
			return fmt.Errorf("failed to recover sector %d: %w", i, err)
		}
	}
	return j.syncData()
}

// progress reports the bytes decrypted: the linear segments' sizes.
func (j *decryptJob) progress(active []*node) {
	if j.run.Progress != nil {
		done := remaining(active)
		if lastCrypt(active) < 0 {
			done = j.total
		}
		j.run.Progress(int64(done), int64(j.total))
	}
}

// finish overwrites the device's last shift bytes (old ciphertext) with
// random bytes and leaves the header cryptsetup leaves: one linear
// segment, no keyslots, digests or requirement.
func (j *decryptJob) finish(active []*node) error {
	if len(active) != 1 || active[0].get("type").str != "linear" {
		return errors.New("decryption ended with segments left")
	}
	root, areas := j.h.finishedRoot(linearSegment(0, 0), j.slot, j.digest)
	return j.h.commitFinished(j.dev, j.run.Commit, root, areas, func() error {
		if err := randomArea(j.run.Data, j.total, j.shift); err != nil {
			return fmt.Errorf("failed to wipe unused data device area: %w", err)
		}
		return j.syncData()
	})
}

// randomArea overwrites size bytes at off with random bytes.
func randomArea(dev DataDevice, off, size uint64) error {
	buf := make([]byte, min(size, 1<<20))
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		rand.Read(buf[:n])
		if _, err := dev.WriteAt(buf[:n], int64(off+done)); err != nil {
			return err
		}
		done += n
	}
	return nil
}
