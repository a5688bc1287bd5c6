package ublk

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI, from include/uapi/linux/io_uring.h.
const (
	setupCoopTaskrun  = 1 << 8  // IORING_SETUP_COOP_TASKRUN
	setupSQE128       = 1 << 10 // IORING_SETUP_SQE128
	setupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER
	setupDeferTaskrun = 1 << 13 // IORING_SETUP_DEFER_TASKRUN

	// setupOneThread suits a ring that one thread creates, submits to and
	// waits on: completions are run when that thread asks for them, with
	// no interrupting it (Linux 6.1+).
	setupOneThread = setupCoopTaskrun | setupSingleIssuer | setupDeferTaskrun

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	uringOpNop  = 0  // IORING_OP_NOP
	uringOpRead = 22 // IORING_OP_READ
	uringOpCmd  = 46 // IORING_OP_URING_CMD

	sqeSize = 128 // every ring here is set up with IORING_SETUP_SQE128
	cqeSize = 16
)

// sqOffsets is struct io_sqring_offsets.
type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqOffsets is struct io_cqring_offsets.
type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// sqe is a 128-byte struct io_uring_sqe (IORING_SETUP_SQE128). The union
// starting at offset 48 (addr3 in a 64-byte SQE) is the 80-byte command area
// of IORING_OP_URING_CMD.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64 // cmd_op (low 32 bits) for IORING_OP_URING_CMD
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	cmd         [80]byte
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is one io_uring instance with 128-byte SQEs. It is not safe for
// concurrent use: one goroutine owns it (and, for ublk I/O, one OS thread).
type ring struct {
	fd      int
	sqMem   []byte
	cqMem   []byte // aliases sqMem with IORING_FEAT_SINGLE_MMAP
	sqeMem  []byte
	entries uint32

	sqHead, sqTail *uint32
	sqMask         uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer

	tail uint32 // next SQE slot; published to *sqTail by flush
}

// errNoRing reports that io_uring_setup is unavailable here.
var errNoRing = errors.New("io_uring is not available")

// newRing sets up an io_uring with at least entries submission slots.
func newRing(entries uint32) (*ring, error) { return newRingFlags(entries, 0) }

// newRingFlags sets up an io_uring with extra IORING_SETUP_* flags, or
// without them where the kernel refuses them.
func newRingFlags(entries, extra uint32) (*ring, error) {
	var p uringParams
	p.flags = setupSQE128 | extra
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno == unix.EINVAL && extra != 0 {
		return newRingFlags(entries, 0)
	}
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			return nil, fmt.Errorf("%w: io_uring_setup: %v", errNoRing, errno)
		}
		return nil, fmt.Errorf("io_uring_setup(%d entries, SQE128): %w", entries, errno)
	}
	r := &ring{fd: int(fd), entries: p.sqEntries}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *uringParams) error {
	sqLen := int(p.sqOff.array + p.sqEntries*4)
	cqLen := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	single := p.features&featSingleMmap != 0
	if single && cqLen > sqLen {
		sqLen = cqLen
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap io_uring SQ ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("mmap io_uring CQ ring: %w", err)
		}
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap io_uring SQEs: %w", err)
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Pointer(&r.cqMem[p.cqOff.cqes])
	// The SQ index array maps slot i to SQE i for good; submission order
	// is then the order of the slots.
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// close releases the ring; the kernel cancels what is still pending.
func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && (r.sqMem == nil || &r.cqMem[0] != &r.sqMem[0]) {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// sqSpace returns how many SQEs can be taken before the next submit.
func (r *ring) sqSpace() uint32 {
	return r.entries - (r.tail - atomic.LoadUint32(r.sqHead))
}

// nextSQE returns the next free SQE, zeroed, or nil when the queue is full.
func (r *ring) nextSQE() *sqe {
	if r.sqSpace() == 0 {
		return nil
	}
	s := (*sqe)(unsafe.Pointer(&r.sqeMem[int(r.tail&r.sqMask)*sqeSize]))
	*s = sqe{}
	r.tail++
	return s
}

// pending returns how many published or prepared SQEs the kernel has not
// consumed yet.
func (r *ring) pending() uint32 {
	return r.tail - atomic.LoadUint32(r.sqHead)
}

// submit publishes the prepared SQEs and enters the kernel until all are
// consumed and at least wait completions are ready. Interrupted calls are
// retried: what the kernel consumed is known from the SQ head, so nothing is
// submitted twice.
func (r *ring) submit(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	for {
		toSubmit := r.pending()
		var flags uintptr
		var minComplete uint32
		if wait > 0 && r.ready() < wait {
			flags, minComplete = enterGetEvents, wait
		}
		if toSubmit == 0 && flags == 0 {
			return nil
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), flags, 0, 0)
		switch errno {
		case 0, unix.EINTR:
			// loop: re-check what is consumed and ready
		case unix.EAGAIN, unix.EBUSY:
			// the completion queue must be reaped before more submissions
			if r.ready() > 0 {
				return nil
			}
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// ready returns the number of completions waiting to be reaped.
func (r *ring) ready() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// reap calls fn for every available completion and consumes them.
func (r *ring) reap(fn func(userData uint64, res int32)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := (*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
		fn(c.userData, c.res)
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// prepURingCmd fills s as an IORING_OP_URING_CMD on fd with command op.
func (s *sqe) prepURingCmd(fd int, op uint32, userData uint64) {
	s.opcode = uringOpCmd
	s.fd = int32(fd)
	s.off = uint64(op)
	s.userData = userData
}
