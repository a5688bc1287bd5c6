package s3

import (
	"errors"
	"slices"
	"sort"
)

// Writes to a chunk that is not cached. A write of a whole chunk needs
// nothing from the store, but neither does a sequential writer's first
// write into a chunk that the writes after it will fill: reading the
// chunk there (a GET of a whole chunk, or a miss, before every first
// write into one) would cost a store round trip per chunk and the
// bandwidth of a read beside the write's. So a partial write of a chunk
// not cached takes memory for the whole chunk, writes its part and notes
// which bytes it holds (entry.have); later writes add theirs, and once
// they cover the chunk it is loaded, as if written whole, without a
// request. A read of bytes the writes hold is served from them; any
// other read, or an upload (even a flush's), first loads the chunk and
// merges what the store holds around the bytes written. The scheduler
// leaves such a chunk to fill while writers wait for room (upload.go):
// only its WriteDelay or a flush uploads it.

// extents are sorted, disjoint, non-adjacent byte ranges [lo, hi).
type extents []extent

type extent struct{ lo, hi int64 }

// add returns x with [lo, hi) in it.
func (x extents) add(lo, hi int64) extents {
	i := sort.Search(len(x), func(i int) bool { return x[i].hi >= lo })
	j := i
	for j < len(x) && x[j].lo <= hi {
		lo, hi = min(lo, x[j].lo), max(hi, x[j].hi)
		j++
	}
	return slices.Replace(x, i, j, extent{lo, hi})
}

// covers reports whether x holds all of [lo, hi).
func (x extents) covers(lo, hi int64) bool {
	i := sort.Search(len(x), func(i int) bool { return x[i].hi > lo })
	return i < len(x) && x[i].lo <= lo && hi <= x[i].hi
}

// gaps calls fn for each range of [0, n) that x does not hold.
func (x extents) gaps(n int64, fn func(lo, hi int64)) {
	at := int64(0)
	for _, r := range x {
		if r.lo > at {
			fn(at, r.lo)
		}
		at = r.hi
	}
	if at < n {
		fn(at, n)
	}
}

// writePart writes part at offset at of chunk e (of n bytes), which is
// reserved and whose mu is held, without reading the store.
func (v *Volume) writePart(e *entry, n, at int64, part []byte) {
	end := at + int64(len(part))
	switch {
	case e.loaded && e.data == nil: // all zeros
		v.c.setData(e, allocChunk(n), false)
	case e.loaded:
	case at == 0 && end == n: // the whole chunk: all of it known
		if e.data == nil {
			v.c.setData(e, allocChunkUncleared(n), false)
		} else {
			e.loaded, e.have = true, nil
		}
	default:
		if e.data == nil {
			// Every byte outside have is written over before it is
			// read or uploaded (merge).
			v.c.setBytes(e, allocChunkUncleared(n), false)
		}
		e.have = e.have.add(at, end)
		if e.have.covers(0, n) {
			e.loaded, e.have = true, nil
		}
	}
	e.zero = false
	copy(e.data[at:], part)
	v.c.wrote(e)
}

// merge loads partial chunk e from st under the bytes written into it:
// the rest of its data becomes what the store holds (zeros for a chunk
// not stored). e.mu is held.
func (v *Volume) merge(st *Store, e *entry) error {
	n := v.chunkLen(e.idx)
	stored := allocChunkUncleared(n) // readInto fills it all
	defer freeChunk(stored)
	err := st.readInto(chunkName(e.idx), stored)
	switch {
	case errors.Is(err, errNotFound):
		e.have.gaps(n, func(lo, hi int64) { clear(e.data[lo:hi]) })
	case err != nil:
		return err
	default:
		e.have.gaps(n, func(lo, hi int64) { copy(e.data[lo:hi], stored[lo:hi]) })
	}
	e.loaded, e.have = true, nil
	v.c.mu.Lock()
	e.partial = false
	v.c.mu.Unlock()
	return nil
}
