package luks2

import (
	"bytes"
	"fmt"
	"io"
	"sort"
)

// restore writes a header backup over dev's header area (luksHeaderRestore)
// in an order that a power cut leaves a volume opening with the keys it had
// or with the backup's:
//  1. the backup's keyslots area, except where the device's current header
//     keeps key material, then a flush (the current keys still open);
//  2. where a keyslot of the backup needs an area the current header still
//     uses with other bytes (a key added since the backup, in an area freed
//     since), a bridge: that keyslot's material copied to a place free in
//     both, and a header naming it there (the backup's otherwise, with a
//     seqid above both);
//  3. the rest of the keyslots area, where the replaced keys lived;
//  4. the backup's header copies (LUKS2: primary, flush, secondary, flush;
//     LUKS1: the header), so that one copy is whole at any time;
//  5. the backup's bytes over the bridge's places.
//
// Without a free place for a bridge (a full keyslots area), that keyslot
// opens again once step 3 is done.
func restore(dev Device, size int64, src io.ReaderAt, srcSize int64) error {
	if _, err := checkRestore(dev, size, src, srcSize); err != nil {
		return err
	}
	b, n, err := restoreBackup(src, srcSize)
	if err != nil {
		return err
	}
	if size > 0 && n > size {
		return fmt.Errorf("device is too small (%d bytes) for the %d-byte header backup", size, n)
	}
	buf := make([]byte, n)
	if _, err := src.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("reading the header backup: %w", err)
	}
	var inUse []span
	var curSeq uint64
	if cur, err := readHeader(dev, size); err == nil {
		inUse = cur.impl.keyMaterial()
		curSeq = cur.impl.bin.seqID
	}
	copies := b.headerCopies()
	free, used := span{copies[len(copies)-1].end, n}.split(inUse)
	if err := writeSpans(dev, buf, free); err != nil {
		return err
	}
	moves, err := b.conflicts(dev, buf, inUse)
	if err != nil {
		return err
	}
	if len(moves) > 0 {
		if err := b.writeBridge(dev, buf, moves, curSeq); err != nil {
			return err
		}
	}
	if err := writeSpans(dev, buf, used); err != nil {
		return err
	}
	for _, c := range copies {
		if err := writeSpans(dev, buf, []span{c}); err != nil {
			return err
		}
	}
	var places []span
	for _, m := range moves {
		places = append(places, m.to)
	}
	return writeSpans(dev, buf, places)
}

// move is a keyslot of a backup whose material a bridge header keeps at to
// instead of from.
type move struct {
	slot     int
	from, to span
}

// conflicts returns, for each keyslot of backup h whose material overlaps
// inUse with other bytes than dev holds there, a free place to bridge it
// through; none when some keyslot finds no place.
func (h *header) conflicts(dev io.ReaderAt, buf []byte, inUse []span) ([]move, error) {
	taken := append(append([]span(nil), inUse...), h.keyMaterial()...)
	var moves []move
	for _, a := range h.keyslotAreas() {
		if _, inside := a.span.split(inUse); len(inside) == 0 {
			continue
		}
		now := make([]byte, a.end-a.off)
		if _, err := dev.ReadAt(now, a.off); err != nil {
			return nil, fmt.Errorf("reading the keyslots area: %w", err)
		}
		if bytes.Equal(now, buf[a.off:a.end]) {
			continue
		}
		to, ok := h.freePlace(a.end-a.off, taken)
		if !ok {
			return nil, nil
		}
		taken = append(taken, to)
		moves = append(moves, move{slot: a.slot, from: a.span, to: to})
	}
	return moves, nil
}

// slotArea is a keyslot's material.
type slotArea struct {
	slot int
	span
}

// keyslotAreas lists the material of h's keyslots (LUKS1: active ones).
func (h *header) keyslotAreas() []slotArea {
	var out []slotArea
	if h.v1 != nil {
		n := int64(afSize(int(h.v1.keyBytes), luks1Stripes))
		for i, s := range h.v1.slots {
			if s.active == luks1KeyEnabled {
				out = append(out, slotArea{i, span{int64(s.offset) * 512, int64(s.offset)*512 + n}})
			}
		}
		return out
	}
	for _, id := range sortedIDs(h.meta.keyslots) {
		if k := h.meta.keyslots[id]; k.areaSize > 0 {
			out = append(out, slotArea{id, span{int64(k.areaOffset), int64(k.areaOffset + k.areaSize)}})
		}
	}
	return out
}

// keyMaterial is where the header keeps key material.
func (h *header) keyMaterial() []span {
	var out []span
	for _, a := range h.keyslotAreas() {
		out = append(out, a.span)
	}
	return out
}

// freePlace finds n bytes for key material that overlap no taken span:
// LUKS2, 4 KiB-aligned in the keyslots area; LUKS1, the area of a disabled
// keyslot (LUKS1 keyslots each own a fixed area).
func (h *header) freePlace(n int64, taken []span) (span, bool) {
	fits := func(s span) bool {
		out, _ := s.split(taken)
		return len(out) == 1 && out[0] == s
	}
	if h.v1 != nil {
		size := int64(afSize(int(h.v1.keyBytes), luks1Stripes))
		for _, s := range h.v1.slots {
			if c := (span{int64(s.offset) * 512, int64(s.offset)*512 + size}); s.active != luks1KeyEnabled && c.end-c.off >= n && fits(c) {
				return span{c.off, c.off + n}, true
			}
		}
		return span{}, false
	}
	start := 2 * h.bin.hdrSize
	end := start + int64(h.meta.keyslotsSize)
	for off := start; off+n <= end; off += keyslotsAlign {
		if c := (span{off, off + n}); fits(c) {
			return c, true
		}
	}
	return span{}, false
}

// writeBridge copies the moved keyslots' material from buf to their places
// and writes a header naming them there, durably.
func (h *header) writeBridge(dev Device, buf []byte, moves []move, curSeq uint64) error {
	for _, m := range moves {
		if _, err := dev.WriteAt(buf[m.from.off:m.from.end], m.to.off); err != nil {
			return fmt.Errorf("writing the keyslots area: %w", err)
		}
	}
	if h.v1 != nil {
		next := *h.v1
		for _, m := range moves {
			// Swap areas with the disabled keyslot that owns the place.
			for i := range next.slots {
				if int64(next.slots[i].offset)*512 == m.to.off {
					next.slots[i].offset = next.slots[m.slot].offset
				}
			}
			next.slots[m.slot].offset = uint32(m.to.off / 512)
		}
		tmp := &luks1Header{fresh: true}
		return tmp.store(dev, &next)
	}
	root := h.meta.root.clone()
	for _, m := range moves {
		root.get("keyslots").get(fmt.Sprint(m.slot)).get("area").set("offset", jUint64Str(uint64(m.to.off)))
	}
	m, err := parseMetadata(root, h.bin.hdrSize)
	if err != nil {
		return fmt.Errorf("bridging the header restore: %w", err)
	}
	bridge := &header{bin: h.bin, salt2: h.salt2, meta: m, fresh: true}
	// Above both the current header's and the backup's, so that the bridge
	// wins over either copy a power cut may leave beside it.
	bridge.bin.seqID = max(curSeq, h.bin.seqID) + 1
	return bridge.write(dev)
}

// span is the byte range [off, end).
type span struct{ off, end int64 }

// split returns the parts of s outside every hole and the parts inside one.
func (s span) split(holes []span) (outside, inside []span) {
	sort.Slice(holes, func(i, j int) bool { return holes[i].off < holes[j].off })
	at := s.off
	for _, h := range holes {
		lo, hi := max(h.off, at), min(h.end, s.end)
		if lo >= hi {
			continue
		}
		if lo > at {
			outside = append(outside, span{at, lo})
		}
		inside = append(inside, span{lo, hi})
		at = hi
	}
	if at < s.end {
		outside = append(outside, span{at, s.end})
	}
	return outside, inside
}

// writeSpans writes buf's bytes of each span to dev, then flushes.
func writeSpans(dev Device, buf []byte, spans []span) error {
	if len(spans) == 0 {
		return nil
	}
	for _, s := range spans {
		if _, err := dev.WriteAt(buf[s.off:s.end], s.off); err != nil {
			return fmt.Errorf("writing the header: %w", err)
		}
	}
	return flush(dev)
}

// headerCopies are the header's own bytes in the order a restore writes
// them: LUKS2's primary and secondary copies, LUKS1's header up to its
// first key material.
func (h *header) headerCopies() []span {
	if h.v1 == nil {
		return []span{{0, h.bin.hdrSize}, {h.bin.hdrSize, 2 * h.bin.hdrSize}}
	}
	first := uint32(1<<32 - 1)
	for _, s := range h.v1.slots {
		first = min(first, s.offset)
	}
	return []span{{0, int64(first) * 512}}
}
