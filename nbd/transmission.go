package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// session is one connection in the transmission phase. One goroutine reads
// requests; each runs on a worker of the session, bounded in number and in
// payload bytes, and is answered as soon as it is done (out of order).
// Replies are serialized by wmu and combined when several are ready.
type session struct {
	srv        *Server
	r          *bufio.Reader
	w          io.Writer
	flags      uint16
	structured bool
	allocation bool     // base:allocation was selected: BLOCK_STATUS is allowed
	conn       net.Conn // for deadlines; nil when serving plain streams (fuzzing)

	stopMu  sync.Mutex
	stopped bool // stop was called: the read deadline stays in the past

	wmu     sync.Mutex
	writing bool           // a sender is writing; others queue
	queue   []*queuedReply // replies waiting for the writer
	spare   []*queuedReply // the previous batch's slice, reused
	iov     net.Buffers    // the writer's scratch list of pieces
	broken  atomic.Bool    // a reply could not be written

	budget   *semaphore   // payload bytes in flight on this connection
	inFlight atomic.Int64 // the same, once the server-wide budget is taken too
	slots    chan struct{}
	work     chan func() // unbuffered: a send succeeds when a worker is idle
	workers  int         // started so far; only the reading goroutine counts
	wg       sync.WaitGroup
	requests atomic.Int64
}

func (s *Server) newSession(r *bufio.Reader, w io.Writer, flags uint16, structured bool) *session {
	return &session{
		srv:        s,
		r:          r,
		w:          w,
		flags:      flags,
		structured: structured,
		budget:     newSemaphore(s.cfg.MaxInFlightBytes),
		slots:      make(chan struct{}, s.cfg.MaxInFlightRequests),
		work:       make(chan func()),
	}
}

// ErrConnectionLost is returned by ServeConn and ServeTransmission when
// the peer closed the connection without NBD_CMD_DISC: a client that went
// away, or the kernel dropping a connection it timed out.
var ErrConnectionLost = errors.New("nbd: connection closed without a disconnect request")

// errProtocol marks a request the server cannot stay in step after.
var errProtocol = errors.New("protocol violation")

// serve reads and dispatches requests until the client disconnects, sends
// NBD_CMD_DISC, breaks the protocol, or the server stops the session. It
// waits for every dispatched request to be answered.
func (ss *session) serve() error {
	err := ss.read()
	ss.wg.Wait()
	return err
}

// read is serve without the wait: requests may still be in flight when it
// returns, until ss.wg says they are done.
func (ss *session) read() error {
	defer close(ss.work)
	var hdr [requestHeaderLen]byte
	for {
		if ss.broken.Load() {
			return errors.New("writing a reply failed")
		}
		if _, err := io.ReadFull(ss.r, hdr[:]); err != nil {
			if err == io.EOF || errors.Is(err, net.ErrClosed) {
				return ErrConnectionLost
			}
			return err
		}
		req, err := parseRequest(hdr[:])
		if err != nil {
			return err
		}
		ss.requests.Add(1)
		if req.typ == cmdDisc {
			return nil
		}
		if err := ss.dispatch(req); err != nil {
			return err
		}
	}
}

// parseRequest parses a request header.
func parseRequest(b []byte) (request, error) {
	if m := binary.BigEndian.Uint32(b[0:]); m != magicRequest {
		return request{}, fmt.Errorf("%w: bad request magic %#x", errProtocol, m)
	}
	return request{
		flags:  binary.BigEndian.Uint16(b[4:]),
		typ:    binary.BigEndian.Uint16(b[6:]),
		cookie: binary.BigEndian.Uint64(b[8:]),
		offset: binary.BigEndian.Uint64(b[16:]),
		length: binary.BigEndian.Uint32(b[24:]),
	}, nil
}

// refuseZeroing returns the error code for a trim or write-zeroes request
// that may not run (read-only export, the request not allowed as sent,
// or the range outside the export, answered with outOfRange), or 0.
func (ss *session) refuseZeroing(req request, ro, allowed bool, outOfRange uint32) uint32 {
	switch {
	case ro:
		return errPerm
	case !allowed:
		return errInval
	case !ss.inRange(req):
		return outOfRange
	}
	return 0
}

// badFlags reports whether req carries a flag the server does not know,
// or one that does not apply to its command: NO_HOLE and FAST_ZERO other
// than on WRITE_ZEROES, DF other than on a READ with structured replies,
// REQ_ONE other than on BLOCK_STATUS. Such a request fails with EINVAL,
// as nbdkit fails it. (FUA goes with any command.)
func (ss *session) badFlags(req request) bool {
	f := req.flags
	switch {
	case f&^(cmdFlagFUA|cmdFlagNoHole|cmdFlagDF|cmdFlagReqOne|cmdFlagFastZero) != 0:
		return true
	case f&(cmdFlagNoHole|cmdFlagFastZero) != 0 && req.typ != cmdWriteZeroes:
		return true
	case f&cmdFlagDF != 0 && (req.typ != cmdRead || !ss.structured):
		return true
	case f&cmdFlagReqOne != 0 && req.typ != cmdBlockStatus:
		return true
	}
	return false
}

// inRange reports whether [off, off+length) lies inside the export, without
// overflowing on hostile offsets.
func (ss *session) inRange(req request) bool {
	size := uint64(ss.srv.Size())
	return req.offset <= size && uint64(req.length) <= size-req.offset
}

// dispatch validates req, reads a WRITE's payload, and starts the request.
// Only errors that leave the stream out of step are returned.
func (ss *session) dispatch(req request) error {
	srv := ss.srv
	ro := ss.flags&FlagReadOnly != 0 || srv.cfg.ReadOnly
	req.answer = ss.newAnswer()
	if req.typ != cmdWrite && ss.badFlags(req) { // a WRITE's payload is read first
		return ss.replyError(req, errInval)
	}
	switch req.typ {
	case cmdRead:
		switch {
		case int(req.length) > srv.cfg.MaxRequest:
			return ss.replyError(req, errInval)
		case !ss.inRange(req):
			return ss.replyError(req, errInval)
		}
		ss.start(req, int64(req.length), func() { ss.doRead(req) })
	case cmdWrite:
		if int(req.length) > srv.cfg.MaxRequest {
			// The payload cannot be skipped without reading it all: say
			// why, then hang up.
			ss.reply(req, errInval)
			return fmt.Errorf("%w: write of %d bytes exceeds the maximum %d", errProtocol, req.length, srv.cfg.MaxRequest)
		}
		ss.acquire(int64(req.length))
		buf := blockdev.GetBuffer(int(req.length))
		err := ss.readPayload(buf)
		if err != nil {
			blockdev.PutBuffer(buf)
			ss.release(int64(req.length))
			return fmt.Errorf("reading write payload: %w", err)
		}
		switch {
		case ss.badFlags(req):
			ss.dropPayload(buf, req)
			return ss.replyError(req, errInval)
		case ro:
			ss.dropPayload(buf, req)
			return ss.replyError(req, errPerm)
		case !ss.inRange(req):
			ss.dropPayload(buf, req)
			return ss.replyError(req, errNoSpc)
		}
		ss.run(req, int64(req.length), func() {
			code := ss.doWrite(req, buf)
			blockdev.PutBuffer(buf)
			ss.reply(req, code)
		})
	case cmdFlush:
		ss.start(req, 0, ss.then(req, ss.doFlush))
	case cmdTrim:
		allowed := ss.flags&FlagSendTrim != 0
		if code := ss.refuseZeroing(req, ro, allowed, errInval); code != 0 {
			return ss.replyError(req, code)
		}
		ss.start(req, 0, ss.then(req, ss.doTrim))
	case cmdWriteZeroes:
		// NBD_FLAG_SEND_FAST_ZERO is not advertised.
		allowed := ss.flags&FlagSendWriteZeroes != 0 && req.flags&cmdFlagFastZero == 0
		if code := ss.refuseZeroing(req, ro, allowed, errNoSpc); code != 0 {
			return ss.replyError(req, code)
		}
		ss.start(req, 0, ss.then(req, ss.doWriteZeroes))
	case cmdBlockStatus:
		switch {
		case !ss.structured || !ss.allocation:
			return ss.replyError(req, errInval)
		case req.length == 0 || !ss.inRange(req):
			return ss.replyError(req, errInval)
		}
		ss.start(req, 0, func() { ss.replyBlockStatus(req) })
	default:
		return ss.replyError(req, errInval)
	}
	return nil
}

// readPayload reads a WRITE's payload into buf. A client that stops in
// the middle of one is dropped after IOTimeout; a payload the reader holds
// already needs no deadline (two timer updates saved on small writes).
func (ss *session) readPayload(buf []byte) error {
	if ss.r.Buffered() >= len(buf) {
		_, err := io.ReadFull(ss.r, buf)
		return err
	}
	ss.setReadDeadline(time.Now().Add(ss.srv.cfg.IOTimeout))
	_, err := io.ReadFull(ss.r, buf)
	ss.setReadDeadline(time.Time{})
	return err
}

func (ss *session) dropPayload(buf []byte, req request) {
	blockdev.PutBuffer(buf)
	ss.release(int64(req.length))
}

// acquire takes a request slot and n payload bytes of budget; it blocks
// the reading goroutine, which is the back-pressure on the client. A
// connection with requests in flight leaves the server-wide reserve to
// connections without any (see budget.go).
func (ss *session) acquire(n int64) {
	ss.slots <- struct{}{}
	ss.budget.acquire(n, nil)
	ss.srv.budget.acquire(n, ss.reserveForOthers)
	ss.inFlight.Add(n)
}

func (ss *session) release(n int64) {
	// The session's count drops before the server-wide budget wakes the
	// waiters, so a waiter of this session sees it.
	ss.inFlight.Add(-n)
	ss.budget.release(n)
	ss.srv.budget.release(n)
	<-ss.slots
}

// reserveForOthers is how much of the server-wide budget this connection
// must leave free: nothing while it has no request in flight, else the
// server's reserve.
func (ss *session) reserveForOthers() int64 {
	if ss.inFlight.Load() == 0 {
		return 0
	}
	return ss.srv.reserve
}

// stop makes the reading goroutine return: its read deadline is moved to
// the past and kept there.
func (ss *session) stop() {
	ss.stopMu.Lock()
	defer ss.stopMu.Unlock()
	ss.stopped = true
	if ss.conn != nil {
		ss.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// setReadDeadline sets the read deadline unless the session was stopped.
func (ss *session) setReadDeadline(t time.Time) {
	ss.stopMu.Lock()
	defer ss.stopMu.Unlock()
	if ss.conn != nil && !ss.stopped {
		ss.conn.SetReadDeadline(t)
	}
}

// start takes budget for req and runs it.
func (ss *session) start(req request, n int64, fn func()) {
	ss.acquire(n)
	ss.run(req, n, fn)
}

// run runs fn, which carries out req (budget already taken), on one of
// the session's workers and gives the budget back when fn has replied.
// Workers are started as requests find none idle, up to the request
// limit, and live as long as the session: a fresh goroutine per request
// would grow a new stack each time.
func (ss *session) run(req request, n int64, fn func()) {
	ss.wg.Add(1)
	stop := ss.armTimeout(req)
	job := func() {
		defer ss.wg.Done()
		defer ss.release(n)
		defer stop()
		defer ss.recoverRequest(req)
		fn()
	}
	select {
	case ss.work <- job:
	default:
		if ss.workers < cap(ss.slots) {
			ss.workers++
			go ss.worker(job)
			return
		}
		ss.work <- job
	}
}

// worker runs jobs until the session closes its work channel.
func (ss *session) worker(job func()) {
	for {
		job()
		var ok bool
		if job, ok = <-ss.work; !ok {
			return
		}
	}
}

// then returns a function that runs do and replies with its result.
func (ss *session) then(req request, do func(request) uint32) func() {
	return func() { ss.reply(req, do(req)) }
}

// doRead reads into a pooled buffer and sends it.
func (ss *session) doRead(req request) {
	buf := blockdev.GetBuffer(int(req.length))
	defer blockdev.PutBuffer(buf)
	if len(buf) > 0 {
		if _, err := ss.srv.dev.ReadAt(buf, int64(req.offset)); err != nil && !(errors.Is(err, io.EOF)) {
			ss.reply(req, ss.failure(req, err, errInval))
			return
		}
	}
	ss.replyData(req, buf)
}

func (ss *session) doWrite(req request, buf []byte) uint32 {
	if code := ss.refuseAfterPanic(); code != 0 {
		return code
	}
	if fw := ss.srv.fua; fw != nil && req.flags&cmdFlagFUA != 0 {
		// Durable by itself: a whole-device flush would also fail for
		// writes to other ranges that a failed flush lost.
		if _, err := fw.WriteAtFUA(buf, int64(req.offset)); err != nil {
			return ss.failure(req, err, errNoSpc)
		}
		return 0
	}
	// The payload buffer is the session's own: it may be encrypted in place.
	write := ss.srv.dev.WriteAt
	if ss.srv.scratch != nil {
		write = ss.srv.scratch.WriteAtScratch
	}
	if _, err := write(buf, int64(req.offset)); err != nil {
		return ss.failure(req, err, errNoSpc)
	}
	return ss.fua(req)
}

func (ss *session) doFlush(req request) uint32 {
	if err := ss.srv.dev.Flush(); err != nil {
		return ss.flushFailure(req, err)
	}
	return 0
}

func (ss *session) doTrim(req request) uint32 {
	if code := ss.refuseAfterPanic(); code != 0 {
		return code
	}
	t := ss.srv.trim
	if t == nil {
		return errInval
	}
	if err := t.Trim(int64(req.offset), int64(req.length)); err != nil {
		if notSupported(err) {
			// A discard is a hint; a backend that cannot punch holes
			// (some file systems) ignores it.
			return ss.fua(req)
		}
		return ss.failure(req, err, errInval)
	}
	return ss.fua(req)
}

// doWriteZeroes writes zeroes. The crypt layer never leaves a hole for
// them (zero plaintext is not zero ciphertext), so NBD_CMD_FLAG_NO_HOLE
// holds whether or not the client set it.
func (ss *session) doWriteZeroes(req request) uint32 {
	if code := ss.refuseAfterPanic(); code != 0 {
		return code
	}
	off, n := int64(req.offset), int64(req.length)
	if z := ss.srv.zero; z != nil {
		err := z.WriteZeroes(off, n)
		if err == nil {
			return ss.fua(req)
		}
		if !notSupported(err) {
			return ss.failure(req, err, errNoSpc)
		}
		// The device cannot do it itself: write the zeroes out.
	}
	zero := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(zero)))
		if _, err := ss.srv.dev.WriteAt(zero[:k], off); err != nil {
			return ss.failure(req, err, errNoSpc)
		}
		off += k
		n -= k
	}
	return ss.fua(req)
}

// fua flushes after a write that asked for Forced Unit Access.
func (ss *session) fua(req request) uint32 {
	if req.flags&cmdFlagFUA == 0 {
		return 0
	}
	if err := ss.srv.dev.Flush(); err != nil {
		return ss.flushFailure(req, err)
	}
	return 0
}

// flushFailure is errorCode for a failed flush (of a FLUSH request or
// after a FUA write), always logged: writes the client was told had
// landed may not be durable, the one thing an operator must not miss
// (after the backend reconnected, say, when read failures may have used
// up failure's lines). Bursts are merged: the limiter logs how many lines
// it held back.
func (ss *session) flushFailure(req request, err error) uint32 {
	n := ss.srv.ioErrors.Add(1)
	what := "flush"
	if req.typ != cmdFlush {
		what = fmt.Sprintf("flush after a FUA %s of %d bytes at %d", commandName(req.typ), req.length, req.offset)
	}
	ss.srv.durability.Printf("nbd: %s failed (%d failures so far), acknowledged writes may not be durable: %v", what, n, err)
	return errorCode(err, errInval)
}

// failure is errorCode for req's error, logged when the backend failed
// (EIO, ENOMEM): the first few failures, then one in a thousand, so a dying
// disk cannot flood the log.
func (ss *session) failure(req request, err error, outOfRange uint32) uint32 {
	code := errorCode(err, outOfRange)
	if code == errIO || code == errNoMem {
		if n := ss.srv.ioErrors.Add(1); n <= 10 || n%1000 == 0 {
			ss.srv.logf("nbd: %s of %d bytes at %d failed (%d so far): %v", commandName(req.typ), req.length, req.offset, n, err)
		}
	}
	return code
}

// errorCode maps a device error to the protocol's error numbers, as the
// NBD specification asks: EPERM for a read-only export, ENOSPC for no space
// (EDQUOT and EFBIG included), outOfRange for a request reaching past the
// end (EINVAL for reads and trims, ENOSPC for writes and write zeroes),
// EINVAL for what the export does not support (NBD_ENOTSUP is reserved for
// fast zeroes), ENOMEM, and EIO for everything else: a failing disk, a
// stalled one (a timeout), and errors the client cannot act on.
func errorCode(err error, outOfRange uint32) uint32 {
	switch {
	case errors.Is(err, blockdev.ErrReadOnly), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EPERM):
		return errPerm
	case errors.Is(err, blockdev.ErrOutOfRange):
		return outOfRange
	case notSupported(err):
		return errInval
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return errNoSpc
	case errors.Is(err, syscall.ENOMEM):
		return errNoMem
	}
	return errIO
}

// notSupported reports whether err says the device cannot do the
// operation at all (blockdev.ErrNotSupported, or EOPNOTSUPP from the
// system).
func notSupported(err error) bool {
	return errors.Is(err, blockdev.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP)
}

// replyError answers req with an error right away (from the reading
// goroutine); it fails only when the reply cannot be written.
func (ss *session) replyError(req request, code uint32) error {
	ss.reply(req, code)
	if ss.broken.Load() {
		return errors.New("writing a reply failed")
	}
	return nil
}

// reply sends a reply without payload: simple, or for a READ or
// BLOCK_STATUS under structured replies an error chunk.
func (ss *session) reply(req request, code uint32) {
	if !req.answer.claim() {
		return // timed out and answered already
	}
	if ss.structured && (req.typ == cmdRead || req.typ == cmdBlockStatus) && code != 0 {
		var b [structuredHeaderLen + structuredErrorLength]byte
		putStructuredHeader(b[:], replyFlagDone, replyTypeError, req.cookie, structuredErrorLength)
		binary.BigEndian.PutUint32(b[structuredHeaderLen:], code)
		ss.send(b[:])
		return
	}
	var b [simpleReplyLen]byte
	putSimpleHeader(b[:], code, req.cookie)
	ss.send(b[:])
}

// replyData sends a READ's data.
func (ss *session) replyData(req request, data []byte) {
	if !req.answer.claim() {
		return // timed out and answered already
	}
	if !ss.structured {
		var h [simpleReplyLen]byte
		putSimpleHeader(h[:], 0, req.cookie)
		ss.send(h[:], data)
		return
	}
	if len(data) == 0 {
		var h [structuredHeaderLen]byte
		putStructuredHeader(h[:], replyFlagDone, replyTypeNone, req.cookie, 0)
		ss.send(h[:])
		return
	}
	var h [structuredHeaderLen + structuredDataHdrLen]byte
	putStructuredHeader(h[:], replyFlagDone, replyTypeOffsetData, req.cookie, uint32(structuredDataHdrLen+len(data)))
	binary.BigEndian.PutUint64(h[structuredHeaderLen:], req.offset)
	ss.send(h[:], data)
}

func putSimpleHeader(b []byte, code uint32, cookie uint64) {
	binary.BigEndian.PutUint32(b[0:], magicSimpleReply)
	binary.BigEndian.PutUint32(b[4:], code)
	binary.BigEndian.PutUint64(b[8:], cookie)
}

func putStructuredHeader(b []byte, flags, typ uint16, cookie uint64, length uint32) {
	binary.BigEndian.PutUint32(b[0:], magicStructuredReply)
	binary.BigEndian.PutUint16(b[4:], flags)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], cookie)
	binary.BigEndian.PutUint32(b[16:], length)
}

// send writes one reply's pieces and returns once they are written (the
// caller may then reuse them). Replies are combined: the first sender to
// find no write under way becomes the writer and, after its own reply,
// writes every reply queued meanwhile in one writev, so a busy connection
// spends one system call on many replies. After a failed write the session
// is broken and later replies are dropped.
func (ss *session) send(parts ...[]byte) {
	ss.wmu.Lock()
	if ss.writing {
		r := replyPool.Get().(*queuedReply)
		r.parts = append(r.parts[:0], parts...)
		ss.queue = append(ss.queue, r)
		ss.wmu.Unlock()
		<-r.done
		clear(r.parts)
		replyPool.Put(r)
		return
	}
	ss.writing = true
	ss.wmu.Unlock()

	bufs := append(ss.iov[:0], parts...)
	var batch []*queuedReply
	for {
		ss.write(bufs)
		for _, r := range batch {
			r.done <- struct{}{}
		}
		ss.wmu.Lock()
		if len(ss.queue) == 0 {
			ss.writing = false
			ss.iov = bufs[:0]
			ss.wmu.Unlock()
			return
		}
		batch, ss.queue, ss.spare = ss.queue, ss.spare[:0], batch[:0]
		ss.wmu.Unlock()
		bufs = bufs[:0]
		for _, r := range batch {
			bufs = append(bufs, r.parts...)
		}
	}
}

// write writes bufs unless the session is broken. A client that takes no
// byte of its replies for IOTimeout is dropped (its requests hold their
// budget until then); one that reads slowly is not.
func (ss *session) write(bufs net.Buffers) {
	if ss.broken.Load() {
		return
	}
	for {
		if ss.conn != nil {
			ss.conn.SetWriteDeadline(time.Now().Add(ss.srv.cfg.IOTimeout))
		}
		var n int64
		var err error
		if len(bufs) == 1 {
			k, werr := ss.w.Write(bufs[0])
			bufs[0], n, err = bufs[0][k:], int64(k), werr
		} else if bw, ok := ss.w.(buffersWriter); ok {
			n, err = bw.WriteBuffers(&bufs) // TLS: see tls_writer.go
		} else {
			n, err = bufs.WriteTo(ss.w) // consumes what it wrote
		}
		if err == nil {
			return
		}
		if n == 0 || !isTimeout(err) {
			ss.broken.Store(true)
			ss.stop()
			return
		}
	}
}

// queuedReply is a reply waiting for the writer.
type queuedReply struct {
	parts [][]byte
	done  chan struct{}
}

var replyPool = sync.Pool{New: func() any { return &queuedReply{done: make(chan struct{}, 1)} }}
