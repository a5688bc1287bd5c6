package argon2

import (
	"encoding/binary"
	"runtime"
	"sync"
)

const (
	blockSize  = 1024 // bytes
	blockWords = blockSize / 8
	syncPoints = 4 // slices per pass: the segments of a lane
	// addressesPerBlock is how many reference positions one address
	// block gives in data-independent addressing.
	addressesPerBlock = blockWords
)

// block is one 1 KiB block of the memory, as 64-bit words.
type block [blockWords]uint64

func (b *block) setBytes(in *[blockSize]byte) {
	for i := range b {
		b[i] = binary.LittleEndian.Uint64(in[8*i:])
	}
}

func (b *block) bytes(out *[blockSize]byte) {
	for i, w := range b {
		binary.LittleEndian.PutUint64(out[8*i:], w)
	}
}

// filler fills one derivation's memory: lanes rows of laneLen blocks,
// each row cut into four segments.
type filler struct {
	impl     impl
	mode     Mode
	mem      []block
	passes   uint32
	lanes    uint32
	laneLen  uint32   // q, blocks per lane
	segLen   uint32   // blocks per segment
	totalLen uint32   // m'
	cursors  []cursor // one per lane
}

// interleave is the most lanes one goroutine fills at a time.
const interleave = 4

// fill runs the passes (RFC 9106, 3.2, steps 5 and 6). A slice's segments
// depend only on earlier slices, so the lanes fill them at the same time;
// the slices are the synchronisation points. Each of up to GOMAXPROCS
// goroutines takes a run of lanes and fills their segments block by block
// in turn: each block waits on a reference block read from anywhere in
// memory, and while one lane waits for its read (prefetched as soon as its
// position is known) the others compute.
func (f *filler) fill() {
	workers := min(f.lanes, uint32(runtime.GOMAXPROCS(0)))
	perWorker := (f.lanes + workers - 1) / workers
	var wg sync.WaitGroup
	for pass := range f.passes {
		for slice := range uint32(syncPoints) {
			for first := perWorker; first < f.lanes; first += perWorker {
				wg.Go(func() { f.lanesOf(pass, slice, first, min(first+perWorker, f.lanes)) })
			}
			f.lanesOf(pass, slice, 0, min(perWorker, f.lanes))
			wg.Wait()
		}
	}
}

// lanesOf fills the segments of lanes [from, to) in one slice, interleave
// lanes at a time.
func (f *filler) lanesOf(pass, slice, from, to uint32) {
	for ; from < to; from += interleave {
		cs := f.cursors[from:min(from+interleave, to)]
		for i := range cs {
			cs[i].start(f, position{pass: pass, slice: slice, lane: from + uint32(i)})
		}
		for cs[0].pos.index < f.segLen {
			for i := range cs {
				cs[i].step(f)
			}
		}
	}
}

// position names the segment being filled and the block in it.
type position struct {
	pass, slice, lane, index uint32
}

// cursor is one lane's place in the segment it fills: the block at
// pos.index, cur, is G(prev, ref), ref already prefetched.
type cursor struct {
	pos         position
	cur, prev   uint32
	ref         uint32
	independent bool // data-independent addressing
	addr        addresser
}

// start places c at the first block of a segment.
func (c *cursor) start(f *filler, pos position) {
	c.pos = pos
	c.independent = f.mode == Argon2i || (f.mode == Argon2id && pos.pass == 0 && pos.slice < syncPoints/2)
	if c.independent {
		c.addr.init(f, pos)
	}
	if pos.pass == 0 && pos.slice == 0 {
		c.pos.index = 2 // the first two blocks come from H0
	}
	laneStart := pos.lane * f.laneLen
	c.cur = laneStart + pos.slice*f.segLen + c.pos.index
	c.prev = c.cur - 1
	if c.cur == laneStart {
		c.prev = laneStart + f.laneLen - 1
	}
	if c.pos.index < f.segLen { // else, at the least memory, slice 0 is all from H0
		c.ref = c.refAt(f, c.pos.index)
	}
}

// step fills the block at c and moves to the next one. With
// data-independent addressing the next reference is known before the
// block is; with data-dependent addressing it comes from the block.
func (c *cursor) step(f *filler) {
	ref := c.ref
	next := c.pos.index + 1
	more := next < f.segLen
	if c.independent && more {
		c.ref = c.refAt(f, next)
	}
	compress(f.impl, &f.mem[c.cur], &f.mem[c.prev], &f.mem[ref], c.pos.pass > 0)
	c.prev = c.cur
	c.cur++
	c.pos.index = next
	if !c.independent && more {
		c.ref = c.refAt(f, next)
	}
}

// refAt returns the reference block of the block at index in c's segment
// and prefetches it. With data-dependent addressing the block before it
// must be done.
func (c *cursor) refAt(f *filler, index uint32) uint32 {
	var rand uint64
	if c.independent {
		rand = c.addr.next(f, index)
	} else {
		rand = f.mem[c.prev][0]
	}
	pos := c.pos
	pos.index = index
	ref := f.refIndex(pos, rand)
	prefetch(&f.mem[ref])
	return ref
}

// refIndex maps the pseudo-random value rand to the block that the block
// at pos takes as its reference (RFC 9106, 3.4): the lane from the high 32
// bits, then a position in that lane's reference area, skewed towards
// recent blocks, from the low 32 bits.
func (f *filler) refIndex(pos position, rand uint64) uint32 {
	refLane := uint32(rand>>32) % f.lanes
	if pos.pass == 0 && pos.slice == 0 {
		refLane = pos.lane
	}
	sameLane := refLane == pos.lane
	// The area is every block of the lane already finished, less the
	// current segment of other lanes and the previous block.
	var area uint32
	if pos.pass == 0 {
		area = pos.slice * f.segLen
	} else {
		area = f.laneLen - f.segLen
	}
	switch {
	case sameLane:
		area += pos.index - 1
	case pos.index == 0:
		area--
	}
	x := rand & 0xffffffff
	x = x * x >> 32
	rel := uint64(area) - 1 - uint64(area)*x>>32
	var start uint32
	if pos.pass > 0 && pos.slice != syncPoints-1 {
		start = (pos.slice + 1) * f.segLen
	}
	// start < laneLen and rel < laneLen: one subtraction is the modulo.
	abs := uint64(start) + rel
	if abs >= uint64(f.laneLen) {
		abs -= uint64(f.laneLen)
	}
	return refLane*f.laneLen + uint32(abs)
}

// addresser generates the pseudo-random values of data-independent
// addressing: G(0, G(0, Z)) of an input block Z that counts up, each
// giving 128 values.
type addresser struct {
	input, addresses block
}

func (a *addresser) init(f *filler, pos position) {
	a.input = block{
		uint64(pos.pass), uint64(pos.lane), uint64(pos.slice),
		uint64(f.totalLen), uint64(f.passes), uint64(f.mode),
	}
	if pos.pass == 0 && pos.slice == 0 {
		// The segment starts at index 2, mid-block: make the first block.
		a.refill(f.impl)
	}
}

// next returns the pseudo-random value for index i of the segment.
func (a *addresser) next(f *filler, i uint32) uint64 {
	if i%addressesPerBlock == 0 {
		a.refill(f.impl)
	}
	return a.addresses[i%addressesPerBlock]
}

func (a *addresser) refill(im impl) {
	a.input[6]++
	compress(im, &a.addresses, &zeroBlock, &a.input, false)
	compress(im, &a.addresses, &zeroBlock, &a.addresses, false)
}

var zeroBlock block
