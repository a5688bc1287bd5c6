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
	var cur onDisk
	if hd, err := readHeader(dev, size); err == nil {
		cur = hd.impl
		inUse = keyMaterial(cur)
	}
	copies := b.headerCopies()
	free, used := span{copies[len(copies)-1].end, n}.split(inUse)
	if err := writeSpans(dev, buf, free); err != nil {
		return err
	}
	moves, err := conflicts(b, dev, buf, inUse)
	if err != nil {
		return err
	}
	if len(moves) > 0 {
		if err := b.writeBridge(dev, buf, moves, cur); err != nil {
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
func conflicts(h onDisk, dev io.ReaderAt, buf []byte, inUse []span) ([]move, error) {
	taken := append(append([]span(nil), inUse...), keyMaterial(h)...)
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

// keyslotAreas lists the material of h's keyslots.
func (h *header) keyslotAreas() []slotArea {
	var out []slotArea
	for _, id := range sortedIDs(h.meta.keyslots) {
		if k := h.meta.keyslots[id]; k.areaSize > 0 {
			out = append(out, slotArea{id, span{int64(k.areaOffset), int64(k.areaOffset + k.areaSize)}})
		}
	}
	return out
}

// keyslotAreas lists the material of h's active keyslots.
func (h *luks1Header) keyslotAreas() []slotArea {
	var out []slotArea
	n := int64(afSize(int(h.keyBytes), luks1Stripes))
	for i, s := range h.slots {
		if s.active == luks1KeyEnabled {
			out = append(out, slotArea{i, span{int64(s.offset) * 512, int64(s.offset)*512 + n}})
		}
	}
	return out
}

// keyMaterial is where header h keeps key material.
func keyMaterial(h onDisk) []span {
	var out []span
	for _, a := range h.keyslotAreas() {
		out = append(out, a.span)
	}
	return out
}

// fits reports whether s overlaps no taken span.
func fits(s span, taken []span) bool {
	out, _ := s.split(taken)
	return len(out) == 1 && out[0] == s
}

// freePlace finds n bytes for key material that overlap no taken span,
// 4 KiB-aligned in the keyslots area.
func (h *header) freePlace(n int64, taken []span) (span, bool) {
	start := 2 * h.bin.hdrSize
	end := start + int64(h.meta.keyslotsSize)
	for off := start; off+n <= end; off += keyslotsAlign {
		if c := (span{off, off + n}); fits(c, taken) {
			return c, true
		}
	}
	return span{}, false
}

// freePlace finds n bytes for key material that overlap no taken span in
// the area of a disabled keyslot (LUKS1 keyslots each own a fixed area).
func (h *luks1Header) freePlace(n int64, taken []span) (span, bool) {
	size := int64(afSize(int(h.keyBytes), luks1Stripes))
	for _, s := range h.slots {
		if c := (span{int64(s.offset) * 512, int64(s.offset)*512 + size}); s.active != luks1KeyEnabled && c.end-c.off >= n && fits(c, taken) {
			return span{c.off, c.off + n}, true
		}
	}
	return span{}, false
}

// copyMoved copies the moved keyslots' material from buf to their places.
func copyMoved(dev Device, buf []byte, moves []move) error {
	for _, m := range moves {
		if _, err := dev.WriteAt(buf[m.from.off:m.from.end], m.to.off); err != nil {
			return fmt.Errorf("writing the keyslots area: %w", err)
		}
	}
	return nil
}

// writeBridge copies the moved keyslots' material from buf to their places
// and writes a header naming them there, durably: the backup's header with
// the areas swapped with the disabled keyslots that own the places.
func (h *luks1Header) writeBridge(dev Device, buf []byte, moves []move, _ onDisk) error {
	if err := copyMoved(dev, buf, moves); err != nil {
		return err
	}
	next := *h
	for _, m := range moves {
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

// writeBridge copies the moved keyslots' material from buf to their places
// and writes a header naming them there, durably, with a seqid above both
// the backup's and cur's (the device's header, when LUKS2).
func (h *header) writeBridge(dev Device, buf []byte, moves []move, cur onDisk) error {
	if err := copyMoved(dev, buf, moves); err != nil {
		return err
	}
	var curSeq uint64
	if c, ok := cur.(*header); ok {
		curSeq = c.bin.seqID
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

// headerCopies are the primary and the secondary copy.
func (h *header) headerCopies() []span {
	return []span{{0, h.bin.hdrSize}, {h.bin.hdrSize, 2 * h.bin.hdrSize}}
}

// headerCopies is the header up to its first key material.
func (h *luks1Header) headerCopies() []span {
	first := uint32(1<<32 - 1)
	for _, s := range h.slots {
		first = min(first, s.offset)
	}
	return []span{{0, int64(first) * 512}}
}
