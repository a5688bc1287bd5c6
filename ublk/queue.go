package ublk

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
)

// inlineMaxBytes is the largest request a queue thread serves itself;
// larger ones go to a worker, so that several run on several cores while
// the thread goes on fetching. Handing a request over costs about as much
// as a few KiB of crypto.
const inlineMaxBytes = 64 << 10

// wakeTag is the user data of the eventfd read that wakes a queue's thread
// when workers have finished requests; tags are below 4096.
const wakeTag = 1 << 32

// queue serves one hardware queue of the device: its own io_uring, driven
// by one goroutine locked to its OS thread (ublk accepts a queue's commands
// from one task only). Requests are served on that thread, or with workers
// on a goroutine each; finished ones then come back through a list and an
// eventfd, and the queue thread commits them.
type queue struct {
	id       int
	depth    int
	charFD   int
	encoded  bool
	userCopy bool
	inline   bool // serve small requests on the queue thread, not on workers
	timeout  time.Duration
	h        *handler

	ring    *ring
	descs   []byte   // the kernel's ublksrv_io_desc array for this queue
	bufs    [][]byte // per-tag buffers in copy mode
	wakeFD  int
	wakeBuf *[8]byte

	mu       sync.Mutex
	finished []finished

	workers  sync.WaitGroup // requests being served
	stall    stallWatch     // whether the device stalls (stall.go)
	closed   int            // tags the kernel aborted
	stopping atomic.Bool
	err      error
	tid      int // the thread run runs on
}

type finished struct {
	tag uint16
	res int32
}

// setup maps the queue's descriptor array; buffers for copy mode are
// anonymous mappings, one per tag, so the kernel copies straight into them.
func (q *queue) setup(maxIO int) error {
	page := unix.Getpagesize()
	var err error
	q.descs, err = unix.Mmap(q.charFD, descMapOffset(q.id, page), descMapLen(q.depth, page), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("ublk queue %d: mmap descriptors: %w", q.id, err)
	}
	if !q.userCopy {
		q.bufs = make([][]byte, q.depth)
		for t := range q.bufs {
			q.bufs[t], err = unix.Mmap(-1, 0, maxIO, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return fmt.Errorf("ublk queue %d: buffer for tag %d: %w", q.id, t, err)
			}
		}
	}
	q.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("ublk queue %d: eventfd: %w", q.id, err)
	}
	q.wakeBuf = new([8]byte)
	return nil
}

// holdsCommands reports whether the kernel may still hold commands of the
// queue's ring: run returned before the kernel aborted every tag.
func (q *queue) holdsCommands() bool { return q.ring != nil && q.closed < q.depth }

// release frees what the queue holds; run must have returned, or never run.
func (q *queue) release() {
	if q.ring != nil {
		q.ring.close()
	}
	if q.wakeFD >= 0 {
		unix.Close(q.wakeFD)
	}
	for _, b := range q.bufs {
		if b != nil {
			unix.Munmap(b)
		}
	}
	if q.descs != nil {
		unix.Munmap(q.descs)
	}
}

// run serves the queue until the kernel aborts every tag (the device is
// stopped) or stop is called. ready receives the outcome of fetching. It
// runs on a thread of its own (goLockedThread): the queue's task for the
// kernel, which ends when run returns.
func (q *queue) run(ready chan<- error) error {
	q.tid = unix.Gettid()
	// The thread is left to the scheduler, not pinned to the CPUs whose
	// requests come to this queue (GET_QUEUE_AFFINITY, as ublksrv pins
	// them): pinned, it shared its CPU with the submitter, fio, while the
	// other stayed idle, and 4 KiB random reads and writes at depth 32
	// ran at 0.42-0.61 of dm-crypt's speed in the VM (2 vCPUs, 3 rounds);
	// left free, at 0.66-0.83. 1 MiB transfers stayed within the noise.
	// The ring belongs to this thread: it alone submits and reaps.
	r, err := newRingFlags(uint32(q.depth+1), setupOneThread)
	if err != nil {
		err = fmt.Errorf("ublk queue %d: %w", q.id, err)
		ready <- err
		return err
	}
	q.ring = r
	for tag := 0; tag < q.depth; tag++ {
		q.prepIO(ioFetchReq, tag, 0)
	}
	q.armWake()
	err = q.ring.submit(0)
	if err == nil {
		// a FETCH the kernel refuses completes at once
		q.ring.reap(q.complete)
		err = q.err
	}
	ready <- err
	if err != nil {
		return err
	}
	for q.closed < q.depth && !q.stopping.Load() {
		if err := q.ring.submit(1); err != nil {
			q.fail(err)
			break
		}
		q.ring.reap(q.complete)
		q.commitFinished()
	}
	// workers still busy must not touch released memory
	q.workers.Wait()
	return q.err
}

// prepIO queues FETCH_REQ or COMMIT_AND_FETCH_REQ for tag.
func (q *queue) prepIO(op uint32, tag int, res int32) {
	s := q.ring.nextSQE()
	if s == nil {
		// cannot happen: the ring has a slot per tag plus the wake read
		panic("ublk: queue ring overflow")
	}
	s.prepURingCmd(q.charFD, ioOp(op, q.encoded), uint64(tag))
	c := (*ioCmd)(unsafe.Pointer(&s.cmd[0]))
	c.qid = uint16(q.id)
	c.tag = uint16(tag)
	c.result = res
	if !q.userCopy {
		c.addr = uint64(uintptr(unsafe.Pointer(&q.bufs[tag][0])))
	}
}

func (q *queue) armWake() {
	s := q.ring.nextSQE()
	if s == nil {
		panic("ublk: queue ring overflow")
	}
	s.opcode = uringOpRead
	s.fd = int32(q.wakeFD)
	s.addr = uint64(uintptr(unsafe.Pointer(q.wakeBuf)))
	s.len = 8
	s.userData = wakeTag
}

// complete handles one completion: a request to serve, an aborted tag, or
// the wake-up read.
func (q *queue) complete(ud uint64, res int32) {
	if ud == wakeTag {
		if !q.stopping.Load() {
			q.armWake()
		}
		return
	}
	tag := int(ud)
	switch {
	case res == ioResOK:
		d := *(*ioDesc)(unsafe.Pointer(&q.descs[tag*ioDescSize]))
		if q.inline && !q.stall.slow.Load() && int64(d.nrSectors)<<9 <= inlineMaxBytes {
			q.stall.inlineStarted.Add(1)
			res := q.handle(tag, d)
			q.stall.inlineDone.Add(1)
			q.prepIO(ioCommitAndFetchReq, tag, res)
			return
		}
		q.workers.Add(1)
		q.stall.workStarted.Add(1)
		go q.serve(tag, d)
	case res == -int32(unix.ENODEV):
		q.closed++ // UBLK_IO_RES_ABORT: the device is going away
	default:
		q.closed++
		q.fail(fmt.Errorf("ublk queue %d tag %d: command refused: %v", q.id, tag, unix.Errno(-res)))
	}
}

func (q *queue) fail(err error) {
	if q.err == nil {
		q.err = err
	}
}

// handle serves one request and returns its result.
func (q *queue) handle(tag int, d ioDesc) int32 {
	return q.h.serve(d, q.payload(tag))
}

// payload is how tag's data moves between the kernel and the daemon.
func (q *queue) payload(tag int) payload {
	if q.userCopy {
		return &userCopyPayload{q: q, tag: tag}
	}
	return copyPayload(q.bufs[tag])
}

// serve runs on a worker goroutine.
func (q *queue) serve(tag int, d ioDesc) {
	defer q.workers.Done()
	if q.timeout > 0 {
		q.serveTimed(tag, d)
		return
	}
	q.finish(tag, q.handle(tag, d))
}

// finish hands a worker's result to the queue thread, which commits it.
func (q *queue) finish(tag int, res int32) {
	q.stall.workDone.Add(1)
	q.mu.Lock()
	first := len(q.finished) == 0
	q.finished = append(q.finished, finished{uint16(tag), res})
	q.mu.Unlock()
	if first {
		q.wake()
	}
}

func (q *queue) wake() {
	one := [8]byte{1}
	unix.Write(q.wakeFD, one[:])
}

// commitFinished sends COMMIT_AND_FETCH_REQ for every finished request.
func (q *queue) commitFinished() {
	q.mu.Lock()
	done := q.finished
	q.finished = nil
	q.mu.Unlock()
	if q.stopping.Load() {
		return
	}
	for _, f := range done {
		q.prepIO(ioCommitAndFetchReq, int(f.tag), f.res)
	}
}

// stop makes run return without waiting for the kernel.
func (q *queue) stop() {
	q.stopping.Store(true)
	q.wake()
}

// copyPayload is a tag's buffer the kernel copies to and from (copy mode).
type copyPayload []byte

func (p copyPayload) buffer(n int) []byte { return p[:n] }
func (p copyPayload) load([]byte) error   { return nil }
func (p copyPayload) store([]byte) error  { return nil }
func (p copyPayload) release([]byte)      {}

// userCopyPayload moves data with pread/pwrite on /dev/ublkcN at the tag's
// offset (UBLK_F_USER_COPY); buffers come from blockdev's locked pool:
// they hold plaintext.
type userCopyPayload struct {
	q   *queue
	tag int
}

func (p *userCopyPayload) buffer(n int) []byte { return blockdev.GetBuffer(n) }
func (p *userCopyPayload) release(b []byte)    { blockdev.PutBuffer(b) }

func (p *userCopyPayload) load(buf []byte) error  { return p.copyAll(unix.Pread, buf) }
func (p *userCopyPayload) store(buf []byte) error { return p.copyAll(unix.Pwrite, buf) }

// copyAll runs rw (pread or pwrite on the char device) until all of buf
// is moved to or from the tag's request.
func (p *userCopyPayload) copyAll(rw func(int, []byte, int64) (int, error), buf []byte) error {
	off := userCopyOffset(p.q.id, p.tag)
	for done := 0; done < len(buf); {
		n, err := rw(p.q.charFD, buf[done:], off+int64(done))
		if err != nil {
			return err
		}
		if n == 0 {
			return errShortCopy
		}
		done += n
	}
	return nil
}

var errShortCopy = errors.New("ublk: short copy to or from the request")
