package ublk

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// geometry is what the kernel is told about the block device.
type geometry struct {
	size        int64 // bytes
	blockSize   int   // logical block size: 512 .. 4096, a power of two
	maxIOBytes  uint32
	readOnly    bool
	discard     bool // the device implements Trim and discards are allowed
	writeZeroes bool // advertise WRITE_ZEROES (only possible alongside discard)
	fua         bool // the device makes one write durable by itself (FUA)
}

// Largest discard and write-zeroes requests the kernel may send; it splits
// larger ones. Write zeroes may be emulated with buffered writes, so it is
// kept to a size one request can carry in reasonable time.
const (
	maxDiscardSectors     = (1<<32 - 1) >> 9 &^ 7
	maxWriteZeroesSectors = 1 << 17 // 64 MiB
)

// buildParams returns the SET_PARAMS payload for g: the basic parameters
// always (with a volatile write cache, so FLUSH requests reach the daemon),
// the discard parameters only when discards are served.
func buildParams(g geometry) (params, error) {
	var p params
	if g.blockSize < 512 || g.blockSize > 4096 || g.blockSize&(g.blockSize-1) != 0 {
		return p, fmt.Errorf("ublk: logical block size %d is not a power of two in 512..4096", g.blockSize)
	}
	if g.size <= 0 || g.size%int64(g.blockSize) != 0 {
		return p, fmt.Errorf("ublk: device size %d is not a positive multiple of the %d-byte block", g.size, g.blockSize)
	}
	if g.maxIOBytes < 4096 || g.maxIOBytes%4096 != 0 || g.maxIOBytes > 1<<ioBufBits {
		return p, fmt.Errorf("ublk: largest request of %d bytes is not a multiple of 4096 up to 32 MiB", g.maxIOBytes)
	}
	logical := uint8(bits.TrailingZeros(uint(g.blockSize)))
	physical := max(logical, 12)
	p.types = paramTypeBasic
	p.basic = paramBasic{
		attrs:           attrVolatileCache,
		logicalBSShift:  logical,
		physicalBSShift: physical,
		ioMinShift:      logical,
		ioOptShift:      physical,
		maxSectors:      g.maxIOBytes >> 9,
		devSectors:      uint64(g.size) >> 9,
	}
	if g.readOnly {
		p.basic.attrs |= attrReadOnly
	}
	if g.fua && !g.readOnly {
		p.basic.attrs |= attrFUA
	}
	if g.discard && !g.readOnly {
		p.types |= paramTypeDiscard
		p.discard = paramDiscard{
			discardGranularity: uint32(max(g.blockSize, 4096)),
			maxDiscardSectors:  maxDiscardSectors,
			maxDiscardSegments: 1,
		}
		if g.writeZeroes {
			p.discard.maxWriteZeroesSectors = maxWriteZeroesSectors
		}
	}
	p.len = uint32(unsafe.Sizeof(p))
	return p, nil
}
