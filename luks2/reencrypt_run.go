package luks2

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/sha256mb"
)

// defaultHotzone is the most data one step rewrites unless told.
const defaultHotzone = 64 << 20

// reencryptJob is a reencryption being run: the state, both keys' sector
// ciphers and the device.
type reencryptJob struct {
	h        *header
	dev      Device
	st       *reencryptState
	run      ReencryptRun
	total    uint64
	old, new dmcrypt.SectorCipher
}

// newReencryptJob reads the reencryption's state into a job over dev
// (devSize bytes of header and data) run as run says: the data through
// dev and commits as they are unless run says otherwise.
func (h *header) newReencryptJob(dev Device, devSize int64, run ReencryptRun) (*reencryptJob, error) {
	st, err := h.reencryptState()
	if err != nil {
		return nil, err
	}
	j := &reencryptJob{h: h, dev: dev, st: st, run: run}
	if j.total, err = st.dataSize(devSize); err != nil {
		return nil, err
	}
	if n := uint64(run.DeviceSize); n > 0 {
		// Every hotzone, the last included, is whole sectors of both
		// segments and whole checksum blocks.
		align := uint64(max(512, st.oldSeg.sectorSize, st.newSeg.sectorSize, st.blockSize))
		if n > j.total || n%align != 0 {
			return nil, ErrIllegalDeviceSize
		}
		j.total, st.fixed = n, true
	}
	st.settle(j.total)
	if j.run.Data == nil {
		j.run.Data = dev
	}
	if j.run.Commit == nil {
		j.run.Commit = func(write func() error) error { return write() }
	}
	return j, nil
}

func (h *header) reencrypt(dev Device, devSize int64, passphrase []byte, slot int, run ReencryptRun) error {
	j, err := h.newReencryptJob(dev, devSize, run)
	if errors.Is(err, ErrReencryptUnsupported) {
		// cryptsetup opens the keys and checks the digest first: changed
		// metadata is invalid before it is anything else.
		if derr := h.checkReencryptDigestFirst(dev, passphrase, slot); derr != nil {
			return derr
		}
	}
	if err != nil {
		return err
	}
	st := j.st
	if st.mode == "reencrypt" && len(st.oldKeyslots()) == 0 && st.hot == nil && st.done >= j.total {
		// cryptsetup killed while it finished: every byte is in the new
		// cipher and the old keyslots are gone, but the metadata is not
		// cleaned up (cryptsetup 2.6.1 can neither open nor resume such
		// a volume). The new key alone finishes it: finish only removes
		// reencryption metadata.
		newVK, err := h.openDigestKey(dev, st.newDigest, passphrase, slot)
		if err != nil {
			return err
		}
		clear(newVK)
		return j.finish()
	}
	oldVK, newVK, err := h.reencryptKeys(dev, st, passphrase, slot)
	if err != nil {
		return err
	}
	defer clear(oldVK)
	defer clear(newVK)
	return j.runWithKeys(oldVK, newVK)
}

// checkReencryptDigestFirst opens the volume keys of the backup segments
// (by their flags, whatever the mode says) with passphrase and checks the
// reencryption digest with them: ErrWrongPassphrase or ErrReencryptDigest
// when that fails, nil when it passes or cannot be done.
func (h *header) checkReencryptDigestFirst(dev Device, passphrase []byte, slot int) error {
	m := h.meta
	ks := reencryptKeyslotNode(m.root)
	version, ok := reencryptVersionOf(m.mandatory)
	if ks == nil || !ok {
		return nil
	}
	var d *digest
	for id, k := range m.keyslots {
		if k.obj == ks {
			d = m.keyslotDigest(id)
		}
	}
	if d == nil {
		return nil
	}
	keys := map[string][]byte{}
	defer func() {
		for _, k := range keys {
			clear(k)
		}
	}()
	for _, id := range sortedIDs(m.segments) {
		s := m.segments[id]
		for _, flag := range []string{"backup-previous", "backup-final"} {
			if !slices.Contains(s.flags, flag) || s.typ != "crypt" {
				continue
			}
			sd := m.segmentDigest(s.id)
			if sd == nil {
				return nil
			}
			vk, err := h.openDigestKey(dev, sd, passphrase, slot)
			if errors.Is(err, ErrWrongPassphrase) {
				return err
			} else if err != nil {
				return nil
			}
			keys[flag] = vk
		}
	}
	data, err := reencryptVerificationData(m.root, version, keys["backup-previous"], keys["backup-final"])
	if err != nil {
		return nil
	}
	defer clear(data)
	if ok, err := d.verify(data); err == nil && !ok {
		return ErrReencryptDigest
	}
	return nil
}

// runWithKeys checks the keys against the reencryption digest, recovers
// an interrupted hotzone and runs the steps.
func (j *reencryptJob) runWithKeys(oldVK, newVK []byte) error {
	h, st := j.h, j.st
	var err error
	if err := h.verifyReencryptDigest(st, oldVK, newVK); err != nil {
		return err
	}
	if st.done > j.total {
		st.done = j.total
	}
	if j.old, err = segmentCipher(st.oldSeg, oldVK); err != nil {
		return err
	}
	defer j.old.Wipe()
	if j.new, err = segmentCipher(st.newSeg, newVK); err != nil {
		return err
	}
	defer j.new.Wipe()
	if st.hot != nil {
		if err := j.recover(); err != nil {
			return fmt.Errorf("LUKS2 reencryption recovery failed: %w", err)
		}
	}
	if err := j.changeResilience(oldVK, newVK); err != nil {
		return err
	}
	return j.loop()
}

// reencryptKeys opens the old and the new volume key with passphrase, as
// cryptsetup's LUKS2_keyslot_open_all_segments: one keyslot of each digest.
func (h *header) reencryptKeys(dev Device, st *reencryptState, passphrase []byte, slot int) ([]byte, []byte, error) {
	var oldVK []byte
	if st.oldDigest != nil { // an encryption has no old key
		var err error
		if oldVK, err = h.openDigestKey(dev, st.oldDigest, passphrase, slot); err != nil {
			return nil, nil, err
		}
	}
	if st.newDigest == nil { // a decryption has no new key
		return oldVK, nil, nil
	}
	newVK, err := h.openDigestKey(dev, st.newDigest, passphrase, slot)
	if err != nil {
		clear(oldVK)
		return nil, nil, err
	}
	return oldVK, newVK, nil
}

// openDigestKey opens the key of digest d with passphrase through one of
// its keyslots (slot only, when it is one of them).
func (h *header) openDigestKey(dev Device, d *digest, passphrase []byte, slot int) ([]byte, error) {
	vk, _, err := h.openDigestKeySlot(dev, d, passphrase, slot)
	return vk, err
}

// openDigestKeySlot is openDigestKey that also returns the keyslot.
func (h *header) openDigestKeySlot(dev Device, d *digest, passphrase []byte, slot int) ([]byte, int, error) {
	var last error = ErrNoUsableKeyslot
	for _, id := range h.keyslotOrder() {
		if slot >= 0 && id != slot && slices.Contains(d.keyslots, slot) {
			continue
		}
		if !slices.Contains(d.keyslots, id) {
			continue
		}
		vk, err := h.openAndVerify(dev, id, d, passphrase)
		if err == nil {
			return vk, id, nil
		}
		if errors.Is(err, ErrWrongPassphrase) || errors.Is(err, errKeyslotUnusable) {
			last = err
			continue
		}
		return nil, -1, err
	}
	if errors.Is(last, errKeyslotUnusable) {
		last = ErrNoUsableKeyslot
	}
	return nil, -1, last
}

// verifyReencryptDigest checks the reencryption digest against the keys.
func (h *header) verifyReencryptDigest(st *reencryptState, oldVK, newVK []byte) error {
	return h.checkReencryptDigest(st.slot, st.version, oldVK, newVK, ErrReencryptDigest)
}

// checkReencryptDigest checks the digest of the reencrypt keyslot slot
// against the reencryption metadata (of that version) under the keys;
// mismatch is the error when it does not verify.
func (h *header) checkReencryptDigest(slot, version int, oldVK, newVK []byte, mismatch error) error {
	d := h.meta.keyslotDigest(slot)
	if d == nil {
		return ErrReencryptInvalid
	}
	data, err := reencryptVerificationData(h.meta.root, version, oldVK, newVK)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrReencryptInvalid, err)
	}
	defer clear(data)
	if ok, err := d.verify(data); err != nil || !ok {
		return mismatch
	}
	return nil
}

// changeResilience records the resilience run asks for in the reencrypt
// keyslot, with a new reencryption digest, when it differs.
func (j *reencryptJob) changeResilience(oldVK, newVK []byte) error {
	st, res, hash := j.st, j.run.Resilience, cmp.Or(j.run.Hash, "sha256")
	if res == "" || res == st.resilience && (res != "checksum" || hash == st.hash) {
		return nil
	}
	switch res {
	case "checksum":
		if _, err := hashFunc(hash); err != nil {
			return err
		}
	case "journal", "none":
	default:
		return fmt.Errorf("unsupported resilience mode %s", res)
	}
	root := j.h.meta.root.clone()
	area := obj("offset", jUint64Str(st.areaOffset), "size", jUint64Str(st.areaSize), "type", jString(res))
	block := max(st.oldSeg.sectorSize, st.newSeg.sectorSize)
	if res == "checksum" {
		area.set("hash", jString(hash))
		area.set("sector_size", jInt(int64(block)))
	}
	reNode := root.get("keyslots").get(strconv.Itoa(st.slot))
	reNode.set("area", area)
	data, err := reencryptVerificationData(root, st.version, oldVK, newVK)
	if err != nil {
		return err
	}
	defer clear(data)
	d := j.h.meta.keyslotDigest(st.slot)
	dn, err := newDigestNode(data, d.hash, minPBKDF2Iterations, []int{st.slot}, nil)
	if err != nil {
		return err
	}
	root.get("digests").set(strconv.Itoa(d.id), dn)
	if err := j.commit(root); err != nil {
		return err
	}
	st.resilience, st.hash, st.blockSize = res, "", 0
	if res == "checksum" {
		st.hash, st.blockSize = hash, block
	}
	return nil
}

// at is the data offset of the next hotzone, n bytes, done bytes in:
// forward from the start, backward from the end.
func (j *reencryptJob) at(done, n uint64) uint64 {
	if j.st.backward {
		return j.total - done - n
	}
	return done
}

// hotzone is the length of the next step at done.
func (j *reencryptJob) hotzone(done uint64) uint64 {
	n := uint64(defaultHotzone)
	if j.run.HotzoneSize > 0 {
		n = uint64(j.run.HotzoneSize)
	}
	align := uint64(max(j.st.oldSeg.sectorSize, j.st.newSeg.sectorSize, j.st.blockSize))
	switch j.st.resilience {
	case "checksum":
		hs := uint64(hashSize(j.st.hash))
		n = min(n, j.st.areaSize/hs*uint64(j.st.blockSize))
	case "journal":
		n = min(n, j.st.areaSize)
	}
	n = max(n/align*align, align)
	return min(n, j.total-done)
}

func (j *reencryptJob) loop() error {
	st := j.st
	none := st.resilience == "none"
	var buf []byte
	free := func() {}
	defer func() { free() }()
	if j.run.Progress != nil {
		j.run.Progress(int64(st.done), int64(j.total))
	}
	var held func(ok bool) // the last step's hotzone, until its metadata is written
	started := st.done
	for st.done < j.total {
		if j.run.Stop != nil && j.run.Stop() {
			break
		}
		n := j.hotzone(st.done)
		if uint64(len(buf)) < n {
			free()
			buf, free = hotzoneBuffer(int(n))
		}
		b := buf[:n]
		at := j.at(st.done, n)
		held = j.hold(at, n)
		if none {
			// Nothing to protect: each piece is read, rewritten and
			// written while it is in the cache.
			if err := j.rewriteThrough(b, at); err != nil {
				held(false)
				return err
			}
		} else {
			// The checksums are taken as each piece is read, while it is
			// in the cache.
			sums, err := j.readHotzone(b, at)
			if err != nil {
				held(false)
				return fmt.Errorf("failed to read hotzone area starting at %d: %w", at, err)
			}
			root := j.h.stepSegments(st, st.done, n, j.total, true)
			data := b // journal: the old ciphertext itself
			if sums != nil {
				data = sums
			}
			if err := j.protect(root, data); err != nil {
				held(false)
				return fmt.Errorf("failed to write reencryption resilience metadata: %w", err)
			}
			if err := j.rewriteOut(b, at); err != nil {
				held(false)
				return fmt.Errorf("failed to write hotzone area starting at %d: %w", at, err)
			}
			if err := j.syncData(); err != nil {
				held(false)
				return fmt.Errorf("failed to sync data: %w", err)
			}
		}
		st.done += n
		if st.done == j.total {
			break
		}
		if !none {
			if err := j.commit(j.h.stepSegments(st, st.done, 0, j.total, false)); err != nil {
				held(false)
				return err
			}
		}
		held(true)
		held = nil
		if j.run.Progress != nil {
			j.run.Progress(int64(st.done), int64(j.total))
		}
	}
	if st.done < j.total {
		if st.done == started {
			return nil // stopped before a step: the metadata is as it was
		}
		return j.commit(j.h.stepSegments(st, st.done, 0, j.total, false))
	}
	if err := j.finish(); err != nil {
		if held != nil {
			held(false)
		}
		return err
	}
	if held != nil {
		held(true)
	}
	if j.run.Progress != nil {
		j.run.Progress(int64(st.done), int64(j.total))
	}
	return nil
}

// protect writes the hotzone's resilience data (checksums of its old
// ciphertext, or the ciphertext itself) to the reencrypt keyslot area and
// commits root, the hot segments.
func (j *reencryptJob) protect(root *node, data []byte) error {
	st := j.st
	return j.run.Commit(func() error {
		return j.h.store(j.dev, root, func() error {
			if _, err := j.dev.WriteAt(data, int64(st.areaOffset)); err != nil {
				return err
			}
			return nil
		})
	})
}

func (j *reencryptJob) commit(root *node) error {
	return j.run.Commit(func() error { return j.h.replace(j.dev, root) })
}

// rewrite decrypts b (the data at off) with the old cipher and encrypts it
// with the new one, in place, on all cores.
func (j *reencryptJob) rewrite(b []byte, off uint64) {
	onPieces(len(b), 1<<20, func(lo, hi int) { j.rewritePiece(b[lo:hi], off+uint64(lo)) })
}

// rewritePiece decrypts p (the data at off) with the old cipher and
// encrypts it with the new one, in place.
func (j *reencryptJob) rewritePiece(p []byte, off uint64) {
	j.old.Decrypt(p, off/512, j.st.oldSeg.sectorSize)
	j.new.Encrypt(p, off/512, j.st.newSeg.sectorSize)
}

// hotzonePiece is how much of a hotzone one goroutine reads and hashes,
// or rewrites and writes, at a time: small enough to stay in the cache
// from one pass over it to the next.
const hotzonePiece = 1 << 20

// readHotzone reads b, the hotzone at data offset off, in pieces on all
// cores and, with checksum resilience, returns the checksums of its
// blocks, each piece hashed as soon as it is read.
func (j *reencryptJob) readHotzone(b []byte, off uint64) ([]byte, error) {
	st := j.st
	var sums []byte
	if st.resilience == "checksum" {
		sums = make([]byte, len(b)/st.blockSize*hashSize(st.hash))
	}
	err := onPiecesErr(len(b), hotzonePiece, func(lo, hi int) error {
		if _, err := j.run.Data.ReadAt(b[lo:hi], int64(st.dataOffset+off)+int64(lo)); err != nil {
			return err
		}
		if sums != nil {
			sumBlocks(b, sums, lo, hi, st.blockSize, st.hash)
		}
		return nil
	})
	return sums, err
}

// rewriteOut rewrites b (the hotzone at data offset off) from the old
// cipher to the new and writes it, each piece written as soon as it is
// rewritten, on all cores.
func (j *reencryptJob) rewriteOut(b []byte, off uint64) error {
	return onPiecesErr(len(b), hotzonePiece, func(lo, hi int) error {
		j.rewritePiece(b[lo:hi], off+uint64(lo))
		_, err := j.run.Data.WriteAt(b[lo:hi], int64(j.st.dataOffset+off)+int64(lo))
		return err
	})
}

// rewriteThrough reads, rewrites and writes the hotzone at data offset
// off in place, b holding its pieces.
func (j *reencryptJob) rewriteThrough(b []byte, off uint64) error {
	at := int64(j.st.dataOffset + off)
	return rewritePieces(j.run.Data, b, at, at, off, func(p []byte, lo int) {
		j.rewritePiece(p, off+uint64(lo))
	})
}

// rewritePieces reads b's pieces from data at src, rewrites each in place
// (rewrite gets it and its offset in b) and writes it at dst, each piece
// while it is in the cache, on all cores: for a hotzone at data offset
// off (which errors name) whose writes need nothing made durable first,
// and whose source, when it is elsewhere, the writes do not overlap.
func rewritePieces(data DataDevice, b []byte, src, dst int64, off uint64, rewrite func(p []byte, lo int)) error {
	return onPiecesErr(len(b), hotzonePiece, func(lo, hi int) error {
		p := b[lo:hi]
		if _, err := data.ReadAt(p, src+int64(lo)); err != nil {
			return fmt.Errorf("failed to read hotzone area starting at %d: %w", off, err)
		}
		rewrite(p, lo)
		if _, err := data.WriteAt(p, dst+int64(lo)); err != nil {
			return fmt.Errorf("failed to write hotzone area starting at %d: %w", off, err)
		}
		return nil
	})
}

// checksums hashes each block of raw into its slot of sums, on all cores.
func checksums(raw []byte, blockSize int, hashName string) []byte {
	sums := make([]byte, len(raw)/blockSize*hashSize(hashName))
	// Pieces of whole blocks: 256 of them per piece.
	onPieces(len(raw), 256*blockSize, func(lo, hi int) {
		sumBlocks(raw, sums, lo, hi, blockSize, hashName)
	})
	return sums
}

// sumBlocks hashes the blocks of raw[lo:hi] with the hash named hashName
// into their slots of sums. SHA-256, the default, hashes many at once
// (sha256mb: 2.6x the speed of one at a time with AVX-512, 1.5x with the
// SHA extensions).
func sumBlocks(raw, sums []byte, lo, hi, blockSize int, hashName string) {
	hs := hashSize(hashName)
	if strings.EqualFold(hashName, "sha256") {
		sha256mb.SumBlocks(sums[lo/blockSize*hs:hi/blockSize*hs], raw[lo:hi], blockSize)
		return
	}
	hf, _ := hashFunc(hashName)
	h := hf()
	for off := lo; off < hi; off += blockSize {
		h.Reset()
		h.Write(raw[off : off+blockSize])
		h.Sum(sums[off/blockSize*hs : off/blockSize*hs])
	}
}

// onPieces runs fn on [lo, hi) pieces of [0, n), piece bytes each (the
// last may be shorter), on GOMAXPROCS goroutines.
func onPieces(n, piece int, fn func(lo, hi int)) {
	next := make(chan int, n/piece+1)
	for p := 0; p < n; p += piece {
		next <- p
	}
	close(next)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				fn(p, min(p+piece, n))
			}
		}()
	}
	wg.Wait()
}

// onPiecesErr is onPieces for an fn that can fail: it returns the first
// error (every piece is still tried).
func onPiecesErr(n, piece int, fn func(lo, hi int) error) error {
	var mu sync.Mutex
	var first error
	onPieces(n, piece, func(lo, hi int) {
		if err := fn(lo, hi); err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	})
	return first
}

// finish writes the header cryptsetup leaves after a reencryption: the
// new segment alone, the keyslots of the old key, the backup segments,
// the reencrypt keyslot, their digests and the requirement gone; then
// wipes the areas no keyslot names any more.
func (j *reencryptJob) finish() error {
	st := j.st
	if st.newDigest == nil { // a decryption: the data is plain, the header stays with no keys
		root, areas := j.h.finishedRoot(linearSegment(st.dataOffset, st.newSeg.size), st.slot, st.oldDigest)
		return j.h.commitFinished(j.dev, j.run.Commit, root, areas, nil)
	}
	root, areas := j.h.finishedRoot(segmentNode(st.dataOffset, st.newSeg.size, 0, st.newSeg.cipher, st.newSeg.sectorSize),
		st.slot, st.oldDigest)
	root.get("digests").get(strconv.Itoa(st.newDigest.id)).set("segments", idsNode([]int{0}))
	return j.h.commitFinished(j.dev, j.run.Commit, root, areas, nil)
}

// commitFinished writes root, the metadata at the end of a reencryption,
// to dev and wipes areas (the keyslots gone), durably, in one commit;
// before, when set, first makes the data side's last writes.
func (h *header) commitFinished(dev Device, commit func(write func() error) error, root *node, areas []interval, before func() error) error {
	return commit(func() error {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		if err := h.replace(dev, root); err != nil {
			return err
		}
		for _, a := range areas {
			if err := wipeArea(dev, a.off, a.len); err != nil {
				return err
			}
		}
		return flush(dev)
	})
}

// finishedRoot is the metadata at the end of a reencryption: seg the one
// segment; the reencrypt keyslot reSlot and the old key's keyslots gone
// with their digests; no digest bound to a segment; no reencryption
// requirement. It returns the areas of the keyslots gone, to wipe. old
// is nil for an encryption (no old key).
func (h *header) finishedRoot(seg *node, reSlot int, old *digest) (*node, []interval) {
	root := h.meta.root.clone()
	segs := jObject()
	segs.set("0", seg)
	root.set("segments", segs)
	var areas []interval
	keyslots := root.get("keyslots")
	gone := []int{reSlot}
	if old != nil {
		gone = append(gone, old.keyslots...)
	}
	for _, id := range gone {
		if k := h.meta.keyslots[id]; k != nil {
			areas = append(areas, interval{k.areaOffset, k.areaSize})
		}
		keyslots.del(strconv.Itoa(id))
		unassignTokens(root, id)
	}
	digests := root.get("digests")
	if old != nil {
		digests.del(strconv.Itoa(old.id))
	}
	if d := h.meta.keyslotDigest(reSlot); d != nil {
		digests.del(strconv.Itoa(d.id))
	}
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	removeRequirement(root, reencryptFlag)
	return root, areas
}

// unassignTokens removes keyslot from the tokens' keyslot lists, as
// cryptsetup does when it destroys a keyslot (the tokens stay).
func unassignTokens(root *node, keyslot int) {
	tokens := root.get("tokens")
	if tokens == nil {
		return
	}
	id := strconv.Itoa(keyslot)
	for _, t := range tokens.vals {
		ks := t.get("keyslots")
		if ks == nil || ks.kind != kindArray {
			continue
		}
		kept := ks.vals[:0]
		for _, v := range ks.vals {
			if v.str != id {
				kept = append(kept, v)
			}
		}
		ks.vals = kept
	}
}

// removeRequirement drops the mandatory requirements drop matches, and the
// requirements object when nothing is left in it.
func removeRequirement(root *node, drop func(string) bool) {
	reqs := root.get("config").get("requirements")
	mand := reqs.get("mandatory")
	if mand == nil {
		return
	}
	kept := mand.vals[:0]
	for _, v := range mand.vals {
		if !drop(v.str) {
			kept = append(kept, v)
		}
	}
	mand.vals = kept
	if len(kept) == 0 {
		reqs.del("mandatory")
	}
	if len(reqs.keys) == 0 {
		root.get("config").del("requirements")
	}
}

func hashSize(name string) int {
	h, err := hashFunc(name)
	if err != nil {
		return 32
	}
	return h().Size()
}
