package luks2

import "strconv"

// The segments of one reencryption step, forward direction, as
// cryptsetup's reencrypt_make_{hot,post}_segments lay them out: the data
// already in the new cipher, the hotzone (only while it is rewritten), and
// the rest still in the old cipher; then the backup segments. Each segment
// is bound to its volume key's digest, the hotzone to both.

// segmentNode is a crypt segment object in cryptsetup's field order; size
// 0 is "dynamic".
func segmentNode(offset, size, ivTweak uint64, cipher string, sectorSize int, flags ...string) *node {
	sz := jString("dynamic")
	if size != 0 {
		sz = jUint64Str(size)
	}
	o := obj("type", jString("crypt"), "offset", jUint64Str(offset), "size", sz,
		"iv_tweak", jUint64Str(ivTweak), "encryption", jString(cipher),
		"sector_size", jInt(int64(sectorSize)))
	return withFlags(o, flags)
}

// withFlags adds a segment's flags to o, if any.
func withFlags(o *node, flags []string) *node {
	if len(flags) > 0 {
		a := jArray()
		for _, f := range flags {
			a.push(jString(f))
		}
		o.set("flags", a)
	}
	return o
}

// stepSegments returns a copy of the metadata with the segments of a
// step: the hotzone [done, done+length) while hot, else the data up to
// done in the new cipher. total is the data size.
func (h *header) stepSegments(st *reencryptState, done, length, total uint64, hot bool) *node {
	if st.backward {
		return h.backwardSegments(st, done, length, total, hot)
	}
	root := h.meta.root.clone()
	segs := jObject()
	type bind struct {
		seg int
		d   *digest
	}
	var binds []bind
	add := func(n *node, digests ...*digest) int {
		id := len(segs.keys)
		segs.set(strconv.Itoa(id), n)
		for _, d := range digests {
			binds = append(binds, bind{id, d})
		}
		return id
	}
	newDone := func(size uint64) *node {
		return segmentNode(st.dataOffset, size, 0, st.newSeg.cipher, st.newSeg.sectorSize)
	}
	oldFrom := func(at uint64) *node {
		size := uint64(0)
		if st.oldSeg.size != 0 || st.fixed {
			size = total - at
		}
		if st.oldSeg.typ == "linear" {
			return linearSegment(st.dataOffset+at, size)
		}
		return segmentNode(st.dataOffset+at, size, at/512, st.oldSeg.cipher, st.oldSeg.sectorSize)
	}
	if hot {
		// cryptsetup binds the hotzone first, then the new part, then the
		// old: the digests' segment lists keep that order.
		var newPart *node
		if done > 0 {
			newPart = newDone(done)
			segs.set("0", newPart)
		}
		hz := segmentNode(st.dataOffset+done, length, done/512, st.newSeg.cipher, st.newSeg.sectorSize, "in-reencryption")
		add(hz, st.newDigest, st.oldDigest)
		if newPart != nil {
			binds = append(binds, bind{0, st.newDigest})
		}
		if done+length < total {
			add(oldFrom(done+length), st.oldDigest)
		}
	} else {
		// Nothing is in the new cipher before the first step: the old
		// segment starts the list, as after --init-only.
		if done > 0 {
			add(newDone(done), st.newDigest)
		}
		if done < total {
			add(oldFrom(done), st.oldDigest)
		}
	}
	if st.oldSeg.typ == "linear" {
		add(linearSegment(st.dataOffset, st.oldSeg.size, "backup-previous"))
	} else {
		add(segmentNode(st.dataOffset, st.oldSeg.size, 0, st.oldSeg.cipher, st.oldSeg.sectorSize, "backup-previous"), st.oldDigest)
	}
	final := add(segmentNode(st.dataOffset, st.newSeg.size, 0, st.newSeg.cipher, st.newSeg.sectorSize, "backup-final"), st.newDigest)
	root.set("segments", segs)
	digests := root.get("digests")
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	if st.mode == "encrypt" {
		// cryptsetup's reencrypt_assign_segments_simple: backup-final,
		// then every crypt segment in order.
		binds = []bind{{final, st.newDigest}}
		for i, k := range segs.keys {
			if segs.vals[i].get("type").str == "crypt" && k != strconv.Itoa(final) {
				binds = append(binds, bind{i, st.newDigest})
			}
		}
	}
	for _, b := range binds {
		digests.get(strconv.Itoa(b.d.id)).get("segments").push(jString(strconv.Itoa(b.seg)))
	}
	return root
}

// backwardSegments are stepSegments for a decryption backward, as
// cryptsetup's reencrypt_make_{hot,post}_segments_backward lay them out:
// the data still encrypted at the front (its size fixed), the hotzone
// (linear, only while it is written), the plaintext after it (linear,
// dynamic when the data is), then the backups; the old key's digest is
// bound to backup-previous, then the crypt segment.
func (h *header) backwardSegments(st *reencryptState, done, length, total uint64, hot bool) *node {
	root := h.meta.root.clone()
	segs := jObject()
	add := func(n *node) int {
		id := len(segs.keys)
		segs.set(strconv.Itoa(id), n)
		return id
	}
	if !hot {
		length = 0
	}
	front := total - done - length
	var crypt []int
	if front > 0 {
		crypt = append(crypt, add(segmentNode(st.dataOffset, front, 0, st.oldSeg.cipher, st.oldSeg.sectorSize)))
	}
	if hot {
		add(linearNode(st.dataOffset+front, length, "in-reencryption"))
	}
	if rest := front + length; rest < total {
		size := uint64(0)
		if st.oldSeg.size != 0 || st.fixed {
			size = total - rest
		}
		add(linearSegment(st.dataOffset+rest, size))
	}
	prev := add(segmentNode(st.dataOffset, st.oldSeg.size, 0, st.oldSeg.cipher, st.oldSeg.sectorSize, "backup-previous"))
	add(linearSegment(st.dataOffset, st.newSeg.size, "backup-final"))
	root.set("segments", segs)
	digests := root.get("digests")
	for _, d := range digests.vals {
		d.set("segments", jArray())
	}
	digests.get(strconv.Itoa(st.oldDigest.id)).set("segments", idsNode(append([]int{prev}, crypt...)))
	return root
}
