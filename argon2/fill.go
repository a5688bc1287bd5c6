package argon2

import (
	"encoding/binary"
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
	laneLen  uint32 // q, blocks per lane
	segLen   uint32 // blocks per segment
	totalLen uint32 // m'
}

// fill runs the passes (RFC 9106, 3.2, steps 5 and 6). A slice's segments
// depend only on earlier slices, so the lanes fill them at the same time;
// the slices are the synchronisation points.
func (f *filler) fill() {
	var wg sync.WaitGroup
	for pass := range f.passes {
		for slice := range uint32(syncPoints) {
			for lane := uint32(1); lane < f.lanes; lane++ {
				wg.Go(func() { f.segment(pass, slice, lane) })
			}
			f.segment(pass, slice, 0)
			wg.Wait()
		}
	}
}

// position names the segment being filled and the block in it.
type position struct {
	pass, slice, lane, index uint32
}

// segment fills one lane's segment of one slice.
func (f *filler) segment(pass, slice, lane uint32) {
	pos := position{pass: pass, slice: slice, lane: lane}
	independent := f.mode == Argon2i || (f.mode == Argon2id && pass == 0 && slice < syncPoints/2)
	var addr addresser
	if independent {
		addr.init(f, pos)
	}
	start := uint32(0)
	if pass == 0 && slice == 0 {
		start = 2 // the first two blocks come from H0
	}
	laneStart := lane * f.laneLen
	cur := laneStart + slice*f.segLen + start
	prev := cur - 1
	if cur == laneStart {
		prev = laneStart + f.laneLen - 1
	}
	for i := start; i < f.segLen; i++ {
		pos.index = i
		var rand uint64
		if independent {
			rand = addr.next(f, i)
		} else {
			rand = f.mem[prev][0]
		}
		ref := f.refIndex(pos, rand)
		compress(f.impl, &f.mem[cur], &f.mem[prev], &f.mem[ref], pass > 0)
		prev = cur
		cur++
	}
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
	return refLane*f.laneLen + uint32((uint64(start)+rel)%uint64(f.laneLen))
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
