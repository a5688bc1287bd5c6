package dmcrypt

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/luksd/luksd/blockdev"
)

// DeviceOptions place the crypt layer on its backend.
type DeviceOptions struct {
	Offset        int64  // start of the data segment on the backend, bytes
	Size          int64  // bytes of plaintext; 0 = to the end of the backend
	SectorSize    int    // encryption sector size: 512, 1024, 2048 or 4096
	IVOffset      uint64 // added to every IV sector, in 512-byte units (normally 0)
	AllowDiscards bool   // pass Trim down to the backend
	ReadOnly      bool   // refuse writes
}

// Device is the crypt layer: a plaintext blockdev.Device over a ciphertext
// one, byte-for-byte what dm-crypt writes. It is safe for concurrent use.
//
// Requests need not be sector-aligned: a write that covers part of a sector
// reads, decrypts, patches and re-encrypts that sector while holding it
// exclusively, so concurrent writes never tear a sector. A request is one
// backend call (one per 4 MiB span of a larger one) and its crypto runs
// on all cores (parallel.go).
type Device struct {
	backend    blockdev.Device
	cipher     SectorCipher
	offset     int64
	size       atomic.Int64 // changes only by Resize (resize.go)
	sectorSize int64
	ivOffset   uint64
	readOnly   bool
	trim       blockdev.Trimmer   // the backend's discard; nil: it has none, or the device is read-only
	discards   atomic.Bool        // discards are allowed (discards.go)
	fua        blockdev.FUAWriter // nil: a FUA write is a write and a flush
	lost       lostWrites         // nil: the backend keeps no record of lost writes
	locks      sectorLocks
	closed     atomic.Bool
	active     atomic.Int32 // requests in progress, to size their parallelism
	procs      int          // GOMAXPROCS when the device was made
	span       int64        // the most one backend call carries: maxSpan (tests make it smaller)
	helpers    atomic.Int32 // goroutines started for stalled requests (parallel.go)
	gate       gate         // shut while suspended (suspend.go)
	suspendMu  sync.Mutex   // one Suspend or Resume at a time
	parts      []part       // the segments of a segmented Device (segments.go); nil: one segment

	// online is an online reencryption (hotzone.go); nil: none.
	online atomic.Pointer[Reencryption]
}

// NewDevice returns the crypt layer over backend, encrypting with c. The
// Device owns backend and c: Close closes the one and wipes the other.
func NewDevice(backend blockdev.Device, c SectorCipher, opts DeviceOptions) (*Device, error) {
	ss := opts.SectorSize
	if ss < 512 || ss > 4096 || ss&(ss-1) != 0 {
		return nil, fmt.Errorf("sector size %d is not a power of two from 512 to 4096", ss)
	}
	if opts.Offset < 0 || opts.Offset%512 != 0 {
		return nil, fmt.Errorf("data offset %d is not a multiple of 512 bytes", opts.Offset)
	}
	bsize := backend.Size()
	if opts.Offset > bsize {
		return nil, fmt.Errorf("data offset %d is past the end of the device (%d bytes)", opts.Offset, bsize)
	}
	size := opts.Size
	if size == 0 {
		size = bsize - opts.Offset
		size -= size % int64(ss)
	}
	if size < 0 || size%int64(ss) != 0 {
		return nil, fmt.Errorf("data size %d is not a multiple of the sector size %d", size, ss)
	}
	if size > bsize-opts.Offset {
		return nil, fmt.Errorf("data segment (%d bytes at %d) is larger than the device (%d bytes)", size, opts.Offset, bsize)
	}
	caps, ops := blockdev.OpsOf(backend)
	d := &Device{
		backend:    backend,
		cipher:     c,
		offset:     opts.Offset,
		sectorSize: int64(ss),
		ivOffset:   opts.IVOffset,
		readOnly:   opts.ReadOnly || caps.ReadOnly,
		procs:      runtime.GOMAXPROCS(0),
		span:       maxSpan,
	}
	if !d.readOnly {
		d.trim = ops.Trim
	}
	d.discards.Store(opts.AllowDiscards && d.trim != nil)
	d.size.Store(size)
	d.fua = ops.FUA
	d.lost, _ = backend.(lostWrites)
	return d, nil
}

// Size is the plaintext size in bytes.
func (d *Device) Size() int64 { return d.size.Load() }

// BlockSize is the encryption sector size.
func (d *Device) BlockSize() int { return int(d.sectorSize) }

// Caps: discards pass down when they are allowed and the backend takes
// them; zeroes and FUA writes are the crypt layer's own (WriteZeroes
// encrypts zeroes, WriteAtFUA is durable whatever the backend offers).
func (d *Device) Caps() blockdev.Caps {
	return blockdev.Caps{
		ReadOnly:    d.readOnly,
		Trim:        d.discards.Load(),
		WriteZeroes: true,
		FUA:         true,
		BlockSize:   int(d.sectorSize),
	}
}

// Backend returns the ciphertext device below.
func (d *Device) Backend() blockdev.Device { return d.backend }

// ivSector is the IV sector of the plaintext offset off (sector-aligned).
func (d *Device) ivSector(off int64) uint64 { return uint64(off)/512 + d.ivOffset }

// ReadAt reads and decrypts len(p) bytes at off. Like io.ReaderAt it
// returns io.EOF when the range reaches past the end.
func (d *Device) ReadAt(p []byte, off int64) (int, error) {
	size := d.size.Load()
	if off < 0 || off > size {
		return 0, &blockdev.OpError{Op: "read", Path: "crypt", Off: off, Len: int64(len(p)), Err: blockdev.ErrOutOfRange}
	}
	want := len(p)
	var eof error
	if int64(want) > size-off {
		p = p[:size-off]
		eof = io.EOF
	}
	if len(p) == 0 {
		return 0, eof
	}
	if err := d.gate.enter(&d.closed); err != nil {
		return 0, err
	}
	defer d.gate.leave()
	if d.parts != nil {
		if err := d.readParts(p, off); err != nil {
			return 0, err
		}
		return len(p), eof
	}
	if err := d.spans(off, int64(len(p)), func(sOff, sLen int64) error {
		return d.readSpan(p[sOff-off:sOff-off+sLen], sOff)
	}); err != nil {
		return 0, err
	}
	return len(p), eof
}

// readSpan fills dst (within one span) with the plaintext at off: one
// backend read, then the decryption in parallel. Whole sectors are read
// into dst itself; a request that starts or ends inside a sector reads
// the sectors it covers into a buffer of the span's size.
func (d *Device) readSpan(dst []byte, off int64) error {
	ss := d.sectorSize
	start := off - off%ss
	end := roundUp(off+int64(len(dst)), ss)
	if start == off && end == off+int64(len(dst)) {
		if err := d.readFull(dst, off); err != nil {
			return err
		}
		d.crypt(dst, off, false, nil)
		return nil
	}
	buf := blockdev.GetBuffer(int(end - start))
	defer blockdev.PutBuffer(buf)
	if err := d.readFull(buf, start); err != nil {
		return err
	}
	d.crypt(buf, start, false, nil)
	copy(dst, buf[off-start:])
	clear(buf)
	return nil
}

// WriteAt encrypts p into a buffer of its own and writes it at off; p is
// never modified.
func (d *Device) WriteAt(p []byte, off int64) (int, error) { return d.writeAt(p, off, false, false) }

// WriteAtFUA is WriteAt that returns once the write is durable: each piece
// goes to the backend as a FUA write where it takes them
// (blockdev.FUAWriter), else the backend is flushed after the write.
func (d *Device) WriteAtFUA(p []byte, off int64) (int, error) {
	if d.fua == nil {
		n, err := d.WriteAt(p, off)
		if err == nil {
			err = d.Flush()
		}
		return n, err
	}
	return d.writeAt(p, off, true, false)
}

// writeAt is WriteAt, each piece a FUA write when fua is set; with
// scratch, p may be encrypted in place (scratch.go).
func (d *Device) writeAt(p []byte, off int64, fua, scratch bool) (int, error) {
	if err := d.checkWrite("write", off, int64(len(p))); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := d.gate.enter(&d.closed); err != nil {
		return 0, err
	}
	defer d.gate.leave()
	var err error
	if scratch && d.inPlace(p, off) {
		err = d.writeInPlace(p, off)
	} else {
		err = d.write(off, int64(len(p)), fua, func(dst []byte, at int64) { copy(dst, p[at-off:]) })
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteZeroes writes the ciphertext of zeroes over the range: plaintext
// zeroes must read back, which a hole in the backend would not give.
func (d *Device) WriteZeroes(off, length int64) error {
	if err := d.checkWrite("write zeroes", off, length); err != nil {
		return err
	}
	if length == 0 {
		return nil
	}
	if err := d.gate.enter(&d.closed); err != nil {
		return err
	}
	defer d.gate.leave()
	return d.write(off, length, false, func(dst []byte, _ int64) { clear(dst) })
}

// Trim discards the whole sectors inside the range on the backend when
// discards are allowed; otherwise it returns blockdev.ErrNotSupported.
// Discarded sectors read back as garbage, as with dm-crypt.
func (d *Device) Trim(off, length int64) error {
	if !d.discards.Load() {
		return &blockdev.OpError{Op: "trim", Path: "crypt", Off: off, Len: length, Err: blockdev.ErrNotSupported}
	}
	if err := d.checkWrite("trim", off, length); err != nil {
		return err
	}
	// Inside the gate: the sector size changes when a reencryption ends.
	if err := d.gate.enter(&d.closed); err != nil {
		return err
	}
	defer d.gate.leave()
	start := roundUp(off, d.sectorSize)
	end := off + length - (off+length)%d.sectorSize
	if end <= start {
		return nil
	}
	if d.parts != nil {
		return d.trimParts(start, end-start)
	}
	first, last := start/d.sectorSize, end/d.sectorSize-1
	unlock := d.locks.lock(first, last, true)
	defer unlock()
	return d.trim.Trim(d.offset+start, end-start)
}

// Flush flushes the backend.
func (d *Device) Flush() error {
	if d.readOnly {
		return nil
	}
	if err := d.gate.enter(&d.closed); err != nil {
		return err
	}
	defer d.gate.leave()
	return d.backend.Flush()
}

// Close wipes the key and closes the backend.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.suspendMu.Lock()
	if d.cipher != nil {
		d.cipher.Wipe()
	}
	d.wipeParts()
	d.suspendMu.Unlock()
	d.releaseWaiters()
	return d.backend.Close()
}

func (d *Device) checkWrite(op string, off, length int64) error {
	if d.readOnly {
		return &blockdev.OpError{Op: op, Path: "crypt", Off: off, Len: length, Err: blockdev.ErrReadOnly}
	}
	if size := d.size.Load(); off < 0 || length < 0 || off > size || length > size-off {
		return &blockdev.OpError{Op: op, Path: "crypt", Off: off, Len: length, Err: blockdev.ErrOutOfRange}
	}
	return nil
}

// write writes length bytes at off whose plaintext fill produces: fill(dst,
// at) fills dst with the plaintext that belongs at offset at. With fua,
// each piece is a FUA write (the backend has FUA writes: d.fua).
func (d *Device) write(off, length int64, fua bool, fill func(dst []byte, at int64)) error {
	if d.parts != nil {
		return d.writeParts(off, length, fua, fill)
	}
	ss := d.sectorSize
	partial := off%ss != 0 || (off+length)%ss != 0
	first, last := off/ss, (off+length-1)/ss
	unlock := d.locks.lock(first, last, partial)
	defer unlock()
	return d.spans(off, length, func(sOff, sLen int64) error {
		return d.writeSpan(sOff, sLen, fua, fill)
	})
}

// writeSpan encrypts one span's plaintext into a buffer in parallel and
// writes it with one backend call. Sectors it covers only in part are
// read and decrypted first (the caller holds them exclusively).
func (d *Device) writeSpan(off, length int64, fua bool, fill func(dst []byte, at int64)) error {
	ss := d.sectorSize
	start := off - off%ss
	end := roundUp(off+length, ss)
	buf := blockdev.GetBuffer(int(end - start))
	defer blockdev.PutBuffer(buf)
	if err := d.readPartialSectors(buf, start, off, off+length); err != nil {
		clear(buf)
		return err
	}
	d.crypt(buf, start, true, func(chunk []byte, at int64) {
		// The part of [off, off+length) in the chunk.
		lo, hi := max(off, at), min(off+length, at+int64(len(chunk)))
		if lo < hi {
			fill(chunk[lo-at:hi-at], lo)
		}
	})
	return d.writeBackend(buf, start, fua)
}

// writeBackend writes ciphertext for plaintext offset off, as a FUA
// write when fua is set.
func (d *Device) writeBackend(buf []byte, off int64, fua bool) error {
	if fua {
		_, err := d.fua.WriteAtFUA(buf, d.offset+off)
		return err
	}
	_, err := d.backend.WriteAt(buf, d.offset+off)
	return err
}

// readPartialSectors reads and decrypts into buf, which holds the whole
// sectors from start, the first and last of them where the write
// [off, end) covers them only in part. Two adjacent ones come in one
// backend read; sectors in between are not read, as the write covers
// them whole (a backend that fails to read them does not fail it).
func (d *Device) readPartialSectors(buf []byte, start, off, end int64) error {
	ss := d.sectorSize
	last := start + int64(len(buf)) - ss // the last sector's offset
	head := off != start
	tail := end != last+ss && (last != start || !head)
	switch {
	case head && tail && int64(len(buf)) == 2*ss:
		if err := errors.Join(d.checkLost(start, ss), d.checkLost(last, ss)); err != nil {
			return err
		}
		if err := d.readFull(buf, start); err != nil {
			return err
		}
		d.cipher.Decrypt(buf[:ss], d.ivSector(start), int(ss))
		d.cipher.Decrypt(buf[len(buf)-int(ss):], d.ivSector(last), int(ss))
		return nil
	case head && tail:
		if err := d.readPartialSector(buf[:ss], start); err != nil {
			return err
		}
		return d.readPartialSector(buf[len(buf)-int(ss):], last)
	case head:
		return d.readPartialSector(buf[:ss], start)
	case tail:
		return d.readPartialSector(buf[len(buf)-int(ss):], last)
	}
	return nil
}

// readPartialSector reads and decrypts the one sector at off into dst, for
// a write that covers it only in part.
func (d *Device) readPartialSector(dst []byte, off int64) error {
	if err := d.checkLost(off, d.sectorSize); err != nil {
		return err
	}
	if err := d.readFull(dst, off); err != nil {
		return err
	}
	d.cipher.Decrypt(dst, d.ivSector(off), int(d.sectorSize))
	return nil
}

// checkLost fails for sectors in [off, off+length) whose acknowledged
// write the backend may have lost (a flush failed after it): they hold
// unknown bytes, and patching part of one and writing it back whole would
// pass them off as written (and clear the backend's record of the loss),
// so such a write fails until the whole sector is written again. Only the
// sectors a write covers in part are checked.
func (d *Device) checkLost(off, length int64) error {
	if d.lost == nil {
		return nil
	}
	return d.lost.LostWrites(d.offset+off, length)
}

// readFull reads the ciphertext for plaintext offset off into dst.
func (d *Device) readFull(dst []byte, off int64) error {
	n, err := d.backend.ReadAt(dst, d.offset+off)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// lostWrites is implemented by backends that remember acknowledged writes
// that may have been lost (blockdev.Tracked, blockdev.File).
type lostWrites interface {
	LostWrites(off, length int64) error
}

func roundUp(x, to int64) int64 { return (x + to - 1) / to * to }
