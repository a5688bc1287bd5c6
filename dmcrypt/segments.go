package dmcrypt

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/luksd/luksd/blockdev"
)

// A volume in the middle of a LUKS2 reencryption is several segments one
// after the other, each with its own cipher, key, sector size and IV
// offset (the data already rewritten in the new cipher, the rest still in
// the old one): dm-crypt maps it as a table of crypt targets, one per
// segment, and a segmented Device does the same. Each segment is a Device
// of its own over the shared backend; the segmented Device routes every
// request to the segments it covers, split at their boundaries.

// Segment is one segment of a segmented Device.
type Segment struct {
	Cipher     SectorCipher // owned by the Device from NewSegmented on
	Offset     int64        // start on the backend, bytes
	Size       int64        // bytes of plaintext; 0 = to the end of the backend (last segment only)
	SectorSize int
	IVOffset   uint64 // added to every IV sector, in 512-byte units (the segment's iv_tweak)
}

// part is a segment placed in the plaintext.
type part struct {
	start int64 // plaintext offset of the segment's first byte
	dev   *Device
}

// ErrSegmented is Suspend on a segmented Device: its keys cannot be
// handed back with one Resume.
var ErrSegmented = errors.New("suspend is not supported while the volume is mapped in segments (reencryption in progress)")

// ErrSegmentedResize is Resize on a segmented Device: the segments'
// extents are the reencryption's to move.
var ErrSegmentedResize = errors.New("resize is not supported while the volume is mapped in segments (reencryption in progress)")

// NewSegmented returns the crypt layer over backend for segs, in
// plaintext order; opts' Offset, Size, SectorSize and IVOffset are not
// used (each segment has its own). The Device owns the segments' ciphers,
// also when it fails (they are wiped), and backend once it succeeds.
func NewSegmented(backend blockdev.Device, segs []Segment, opts DeviceOptions) (*Device, error) {
	wipe := func() {
		for _, s := range segs {
			s.Cipher.Wipe()
		}
	}
	if len(segs) == 0 {
		wipe()
		return nil, errors.New("no data segment")
	}
	caps, ops := blockdev.OpsOf(backend)
	// procs and span as NewDevice sets them: an online reencryption
	// that ends (Reencryption.End) leaves this Device one segment, which
	// it then maps itself.
	d := &Device{backend: backend, readOnly: opts.ReadOnly || caps.ReadOnly, fua: ops.FUA, sectorSize: 512,
		procs: runtime.GOMAXPROCS(0), span: maxSpan}
	for i, s := range segs {
		if s.Size == 0 && i != len(segs)-1 {
			wipe()
			return nil, fmt.Errorf("data segment %d has a dynamic size but is not the last", i)
		}
		sub, err := NewDevice(backend, s.Cipher, DeviceOptions{
			Offset: s.Offset, Size: s.Size, SectorSize: s.SectorSize, IVOffset: s.IVOffset,
			AllowDiscards: opts.AllowDiscards, ReadOnly: d.readOnly,
		})
		if err != nil {
			wipe()
			return nil, fmt.Errorf("data segment %d: %w", i, err)
		}
		d.parts = append(d.parts, part{start: d.size.Load(), dev: sub})
		d.size.Add(sub.size.Load())
		d.sectorSize = max(d.sectorSize, sub.sectorSize)
		if sub.trim != nil {
			d.trim = ops.Trim
		}
	}
	d.offset = segs[0].Offset
	return d, nil
}

// Segments reports how many segments the Device maps (1 for NewDevice's).
func (d *Device) Segments() int { return max(len(d.parts), 1) }

// eachPart runs fn on the pieces of [off, off+length) in each segment it
// covers: the segment's Device, the offset in it, and the piece's place
// [lo, hi) relative to off. It stops at the first error.
func (d *Device) eachPart(off, length int64, fn func(sub *Device, subOff int64, lo, hi int64) error) error {
	if r := d.online.Load(); r != nil {
		return r.eachPart(off, length, fn)
	}
	end := off + length
	for _, p := range d.parts {
		pEnd := p.start + p.dev.size.Load()
		if pEnd <= off || p.start >= end {
			continue
		}
		s, e := max(off, p.start), min(end, pEnd)
		if err := fn(p.dev, s-p.start, s-off, e-off); err != nil {
			return err
		}
	}
	return nil
}

// readParts is ReadAt for a segmented Device, inside the gate.
func (d *Device) readParts(p []byte, off int64) error {
	return d.eachPart(off, int64(len(p)), func(sub *Device, at, lo, hi int64) error {
		_, err := sub.ReadAt(p[lo:hi], at)
		return err
	})
}

// writeParts is write for a segmented Device, inside the gate: fill
// gives each segment its plaintext, at offsets of the whole Device.
func (d *Device) writeParts(off, length int64, fua bool, fill func(dst []byte, at int64)) error {
	return d.eachPart(off, length, func(sub *Device, at, lo, hi int64) error {
		shift := off + lo - at // the whole Device's offset of sub's 0
		return sub.write(at, hi-lo, fua, func(dst []byte, subAt int64) { fill(dst, subAt+shift) })
	})
}

// trimParts is Trim for a segmented Device, inside the gate.
func (d *Device) trimParts(off, length int64) error {
	return d.eachPart(off, length, func(sub *Device, at, lo, hi int64) error {
		if sub.trim == nil {
			return nil
		}
		return sub.Trim(at, hi-lo)
	})
}

// wipeParts wipes the segments' keys; the backend is the caller's.
func (d *Device) wipeParts() {
	for _, p := range d.parts {
		p.dev.closed.Store(true)
		p.dev.cipher.Wipe()
	}
}
