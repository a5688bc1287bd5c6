package ublk

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/ratelog"
)

// payload moves one request's data between the kernel and the daemon: the
// kernel's copy into a per-tag buffer (copy mode), or pread/pwrite on
// /dev/ublkcN (UBLK_F_USER_COPY).
type payload interface {
	// buffer returns a buffer of n bytes for the request's data.
	buffer(n int) []byte
	// load fills buf with the data of a WRITE request.
	load(buf []byte) error
	// store hands buf, the data read for a READ request, to the kernel.
	store(buf []byte) error
	// release gives the buffer back.
	release(buf []byte)
}

// handler serves requests on a blockdev.Device.
type handler struct {
	dev      blockdev.Device
	size     int64
	trim     blockdev.Trimmer    // nil: discards are not served
	zero     blockdev.ZeroWriter // nil: write zeroes are emulated
	fua      blockdev.FUAWriter  // nil: the kernel follows FUA writes with a flush
	scratch  blockdev.ScratchWriter
	readOnly bool
	logf     func(format string, args ...any) // nil: failures are not logged
	failures atomic.Uint64
	// durability logs failed flushes apart from other failures: each says
	// acknowledged writes may be lost, so none may go unlogged, but a
	// burst of them is merged into a count.
	durability ratelog.Limiter

	// broken: a request's handling panicked; writes fail (panic.go)
	broken      atomic.Bool
	panics      atomic.Uint64
	stackLogged atomic.Bool
}

func newHandler(dev blockdev.Device, readOnly, allowDiscards bool, logf func(string, ...any)) *handler {
	caps, ops := blockdev.OpsOf(dev)
	h := &handler{dev: dev, size: dev.Size(), readOnly: readOnly || caps.ReadOnly, zero: ops.Zero, fua: ops.FUA, logf: logf}
	h.scratch, _ = dev.(blockdev.ScratchWriter)
	h.durability.Logf = logf
	if allowDiscards && !h.readOnly {
		h.trim = ops.Trim
	}
	return h
}

// serve carries out the request desc describes and returns what is
// committed to the kernel: the byte count for reads and writes, 0 for the
// range operations, or a negative errno. A panic in the handling is
// completed with EIO (panic.go).
func (h *handler) serve(desc ioDesc, data payload) (res int32) {
	defer h.recoverRequest(desc, &res)
	off := int64(desc.startSector) << 9
	n := int64(desc.nrSectors) << 9
	op := desc.opFlags & 0xff
	if op != opFlush && (off < 0 || n < 0 || off > h.size || n > h.size-off) {
		return -int32(syscall.EIO)
	}
	switch op {
	case opRead:
		buf := data.buffer(int(n))
		defer data.release(buf)
		if err := readFull(h.dev, buf, off); err != nil {
			return h.failed(op, off, n, err)
		}
		if err := data.store(buf); err != nil {
			return h.failed(op, off, n, err)
		}
		return int32(n)
	case opWrite:
		if h.readOnly {
			return -int32(syscall.EROFS)
		}
		if h.broken.Load() {
			return -int32(syscall.EIO)
		}
		buf := data.buffer(int(n))
		defer data.release(buf)
		if err := data.load(buf); err != nil {
			return h.failed(op, off, n, err)
		}
		write := h.dev.WriteAt
		if h.scratch != nil {
			// buf is the request's own (a pooled buffer, or the tag's
			// in copy mode, which the kernel copied the data into and
			// does not read back): the crypt layer may encrypt it in
			// place instead of copying it first.
			write = h.scratch.WriteAtScratch
		}
		if desc.opFlags&ioFlagFUA != 0 && h.fua != nil {
			// Durable by itself: a flush here would also fail for
			// writes to other ranges that a failed flush lost.
			write = h.fua.WriteAtFUA
		}
		if _, err := write(buf, off); err != nil {
			return h.failed(op, off, n, err)
		}
		return int32(n)
	case opFlush:
		if err := h.dev.Flush(); err != nil {
			return h.failed(op, off, n, err)
		}
		return 0
	case opDiscard:
		if h.trim == nil {
			return -int32(syscall.EOPNOTSUPP)
		}
		if h.broken.Load() {
			return -int32(syscall.EIO)
		}
		if err := h.trim.Trim(off, n); err != nil && !notSupported(err) {
			// A discard the backend cannot carry out is a hint ignored,
			// as the NBD server ignores it.
			return h.failed(op, off, n, err)
		}
		return 0
	case opWriteZeroes:
		if h.readOnly {
			return -int32(syscall.EROFS)
		}
		if h.broken.Load() {
			return -int32(syscall.EIO)
		}
		if err := h.writeZeroes(off, n); err != nil {
			return h.failed(op, off, n, err)
		}
		return 0
	default:
		return -int32(syscall.EOPNOTSUPP)
	}
}

// zeroChunk is the size of the shared zero buffer for emulated write zeroes.
const zeroChunk = 256 << 10

var zeroes = make([]byte, zeroChunk)

func (h *handler) writeZeroes(off, n int64) error {
	if h.zero != nil {
		if err := h.zero.WriteZeroes(off, n); !notSupported(err) {
			return err
		}
		// The device cannot do it itself: write the zeroes out.
	}
	for n > 0 {
		c := min(n, zeroChunk)
		if _, err := h.dev.WriteAt(zeroes[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

func readFull(r io.ReaderAt, buf []byte, off int64) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// opNames name request types for the log.
var opNames = map[uint32]string{opRead: "read", opWrite: "write", opFlush: "flush", opDiscard: "discard", opWriteZeroes: "write zeroes"}

// failed logs a failed request, the first ten and then one in a thousand
// so a dying disk cannot flood the log (flushes through h.durability,
// which counts what it holds back), and returns its errno.
func (h *handler) failed(op uint32, off, n int64, err error) int32 {
	if errors.Is(err, errTimedOut) {
		return -int32(syscall.EIO) // logged by the timeout
	}
	if h.logf != nil && op == opFlush {
		k := h.failures.Add(1)
		h.durability.Printf("ublk: flush failed (%d failures so far), acknowledged writes may not be durable: %v", k, err)
	} else if h.logf != nil {
		if k := h.failures.Add(1); k <= 10 || k%1000 == 0 {
			h.logf("ublk: %s of %d bytes at %d failed (%d so far): %v", opNames[op], n, off, k, err)
		}
	}
	return errno(err)
}

// errno maps err to the negative errno the kernel completes the request
// with. ublk_drv turns it into a block status (errno_to_blk_status), and
// only a few of those mean what a backend error means: ENOSPC (the store
// is full: EDQUOT and EFBIG too), EOPNOTSUPP (the device cannot do the
// operation) and EROFS. Every other error is EIO, as dm-crypt reports a
// failing disk: passed through, EAGAIN would be BLK_STS_AGAIN (retry a
// non-blocking request), EBUSY and ENOMEM resource shortages the block
// layer may retry, ETIMEDOUT or ENOLINK path errors a multipath layer
// fails over on. A request outside the device is EIO, as the block layer
// reports an access beyond the end.
func errno(err error) int32 {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return -int32(syscall.ENOSPC)
	case notSupported(err):
		return -int32(syscall.EOPNOTSUPP)
	case errors.Is(err, blockdev.ErrReadOnly), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EPERM):
		return -int32(syscall.EROFS)
	}
	return -int32(syscall.EIO)
}

// notSupported reports whether err says the device cannot do the
// operation at all.
func notSupported(err error) bool {
	return errors.Is(err, blockdev.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP)
}
