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
)

// clientConn is one transmission-phase connection of a Client: requests
// are sent by the callers' goroutines (one at a time on the wire), and one
// reader goroutine matches the replies to them by cookie, so any number of
// requests are in flight at once. When the connection fails, every request
// in flight fails with a *connLostError and the connection is done.
type clientConn struct {
	c    net.Conn
	w    io.Writer // c, or for TLS a writer that fills whole records
	r    *bufio.Reader
	info exportInfo
	// ioTimeout bounds how long a request waits for its reply: a server
	// that stops answering loses the connection.
	ioTimeout time.Duration
	// violated logs a protocol violation that ended the connection, with
	// how many requests in flight it failed; nil logs nothing.
	violated func(err error, inFlight int)

	wmu     sync.Mutex
	writing bool        // a caller is writing requests; others queue
	queue   []*call     // requests waiting for the writer
	spare   []*call     // the previous batch's slice, reused
	iov     net.Buffers // the writer's scratch list of pieces

	mu      sync.Mutex
	pending map[uint64]*call
	cookie  uint64
	armedAt time.Time     // when the read deadline was last pushed on
	err     error         // why the connection is done, nil while alive
	dead    chan struct{} // closed when the connection is done

	// acked counts writes (trims and write zeroes too) acknowledged on
	// this connection that were not durable on their own (no FUA); flushed is the part of them a
	// successful flush covered. A connection lost with acked > flushed
	// may have lost acknowledged writes.
	acked, flushed atomic.Int64
}

// call is one request waiting for its reply.
type call struct {
	typ     uint16
	offset  uint64
	length  uint32
	buf     []byte // a read's destination
	got     uint64 // bytes of a structured read answered so far
	err     error
	done    chan struct{}
	header  [requestHeaderLen]byte
	payload []byte // a write's data
	// sent is made when the request is queued behind another caller's
	// write; the writer signals it when it no longer reads the request.
	sent chan struct{}
}

// connLostError fails the requests in flight on a connection that failed:
// they may be sent again on another.
type connLostError struct{ cause error }

func (e *connLostError) Error() string { return "NBD connection lost: " + e.cause.Error() }
func (e *connLostError) Unwrap() error { return e.cause }

// violationError fails the requests in flight on a connection whose
// server broke the protocol. They are not sent again: once the replies
// are out of step nobody knows which of them the server carried out, or
// what it sent instead of a read's data, and a server that misbehaved
// once is likely to misbehave again on a new connection. It is EIO.
type violationError struct {
	op    string
	cause error // wraps errServerProtocol
}

func (e *violationError) Error() string   { return "NBD " + e.op + ": " + e.cause.Error() }
func (e *violationError) Unwrap() []error { return []error{e.cause, syscall.EIO} }

// RemoteError is an error the NBD server replied with.
type RemoteError struct {
	Op    string
	Errno syscall.Errno
	Msg   string // the server's message (structured replies), or ""
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("NBD server: %s: %v", e.Op, e.Errno)
	if e.Msg != "" {
		s += " (" + e.Msg + ")"
	}
	return s
}

func (e *RemoteError) Unwrap() error { return e.Errno }

// wireErrno maps the protocol's error numbers to the system's; unknown
// ones are EIO, as the protocol says a client should treat them.
func wireErrno(code uint32) syscall.Errno {
	switch code {
	case errPerm, errIO, errNoMem, errInval, errNoSpc, errOverflow, errNotSup, errShutdown:
		return syscall.Errno(code) // the protocol fixes Linux's numbers
	}
	return syscall.EIO
}

func newClientConn(c net.Conn, r *bufio.Reader, info exportInfo, ioTimeout time.Duration, violated func(error, int)) *clientConn {
	cc := &clientConn{c: c, w: replyWriter(c), r: r, info: info, ioTimeout: ioTimeout, violated: violated,
		pending: map[uint64]*call{}, dead: make(chan struct{})}
	c.SetDeadline(time.Time{}) // the handshake's deadline ends here
	go cc.readLoop()
	return cc
}

// roundTrip sends one request and waits for its reply. payload is a
// write's data; buf receives a read's.
func (cc *clientConn) roundTrip(typ, flags uint16, offset uint64, length uint32, payload, buf []byte) error {
	cl := &call{typ: typ, offset: offset, length: length, buf: buf, payload: payload, done: make(chan struct{})}
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return &connLostError{cc.err}
	}
	cc.cookie++
	cookie := cc.cookie
	cc.pending[cookie] = cl
	if len(cc.pending) == 1 {
		// Idle until now: the server has IOTimeout to answer. (Under mu,
		// so that the reader cannot clear it after this request counted.)
		cc.armDeadline(time.Now())
	}
	cc.mu.Unlock()

	h := cl.header[:]
	binary.BigEndian.PutUint32(h[0:], magicRequest)
	binary.BigEndian.PutUint16(h[4:], flags)
	binary.BigEndian.PutUint16(h[6:], typ)
	binary.BigEndian.PutUint64(h[8:], cookie)
	binary.BigEndian.PutUint64(h[16:], offset)
	binary.BigEndian.PutUint32(h[24:], length)
	queued := cc.send(cl)
	<-cl.done
	err := cl.err
	if queued && len(payload) > 0 {
		// The caller may reuse the payload only once the writer let go
		// of it: a connection may be lost, or a server answer, before
		// the payload was all written.
		<-cl.sent
	}
	if err == nil && (typ == cmdWrite || typ == cmdTrim || typ == cmdWriteZeroes) && flags&cmdFlagFUA == 0 {
		cc.acked.Add(1)
	}
	return err
}

// send puts cl's request on the wire, combined with others': the first
// caller to find no write under way becomes the writer and, after its own
// request, writes every request queued meanwhile in one writev, so that
// many requests in flight cost few system calls. It reports whether cl was
// queued, in which case the writer signals cl.sent when it is done with it.
// After a failed write the connection is done and queued requests are
// dropped unwritten (their callers see the connection lost).
func (cc *clientConn) send(cl *call) (queued bool) {
	cc.wmu.Lock()
	if cc.writing {
		cl.sent = make(chan struct{}, 1)
		cc.queue = append(cc.queue, cl)
		cc.wmu.Unlock()
		return true
	}
	cc.writing = true
	cc.wmu.Unlock()

	bufs := appendRequest(cc.iov[:0], cl)
	var batch []*call
	for {
		cc.write(bufs)
		for _, q := range batch {
			q.sent <- struct{}{}
		}
		cc.wmu.Lock()
		if len(cc.queue) == 0 {
			cc.writing = false
			clear(bufs[:cap(bufs)])
			cc.iov = bufs[:0]
			cc.wmu.Unlock()
			return false
		}
		batch, cc.queue, cc.spare = cc.queue, cc.spare[:0], batch[:0]
		cc.wmu.Unlock()
		bufs = bufs[:0]
		for _, q := range batch {
			bufs = appendRequest(bufs, q)
		}
	}
}

// appendRequest adds a request's header and payload to bufs.
func appendRequest(bufs net.Buffers, cl *call) net.Buffers {
	bufs = append(bufs, cl.header[:])
	if len(cl.payload) > 0 {
		bufs = append(bufs, cl.payload)
	}
	return bufs
}

// write writes bufs unless the connection is done; a failed write ends it.
func (cc *clientConn) write(bufs net.Buffers) {
	cc.mu.Lock()
	err := cc.err
	cc.mu.Unlock()
	if err != nil {
		return
	}
	cc.c.SetWriteDeadline(time.Now().Add(cc.ioTimeout))
	if bw, ok := cc.w.(buffersWriter); ok {
		_, err = bw.WriteBuffers(&bufs) // TLS: see tls_writer.go
	} else {
		_, err = bufs.WriteTo(cc.w)
	}
	if err != nil {
		cc.fail(fmt.Errorf("sending a request: %w", err))
	}
}

// deadlineSlack is how far the read deadline may lag behind the last
// reply: it is pushed on at most once per slack, not for every reply.
func (cc *clientConn) deadlineSlack() time.Duration { return cc.ioTimeout / 8 }

// armDeadline gives the server until IOTimeout (and at most the slack
// more) after now to send its next reply. cc.mu is held.
func (cc *clientConn) armDeadline(now time.Time) {
	cc.armedAt = now
	cc.c.SetReadDeadline(now.Add(cc.ioTimeout + cc.deadlineSlack()))
}

// fail ends the connection: the reader goroutine, woken by the closed
// socket, then fails every request in flight (only it may, as it may be
// reading into a request's buffer).
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	cc.mu.Unlock()
	cc.c.Close()
}

// failPending fails the requests in flight once the reader has stopped:
// with a *connLostError (they may be sent again) when the connection
// was lost, with a *violationError (EIO) when the server broke the
// protocol.
func (cc *clientConn) failPending() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	violation := errors.Is(cc.err, errServerProtocol)
	for cookie, cl := range cc.pending {
		if violation {
			cl.err = &violationError{op: commandName(cl.typ), cause: cc.err}
		} else {
			cl.err = &connLostError{cc.err}
		}
		close(cl.done)
		delete(cc.pending, cookie)
	}
	close(cc.dead)
}

// close sends NBD_CMD_DISC and ends the connection.
func (cc *clientConn) close() {
	var h [requestHeaderLen]byte
	binary.BigEndian.PutUint32(h[0:], magicRequest)
	binary.BigEndian.PutUint16(h[6:], cmdDisc)
	cc.wmu.Lock()
	if !cc.writing { // else a writer is stuck: just hang up
		cc.c.SetWriteDeadline(time.Now().Add(time.Second))
		cc.c.Write(h[:])
	}
	cc.wmu.Unlock()
	cc.fail(net.ErrClosed)
}

// readLoop reads replies until the connection fails.
func (cc *clientConn) readLoop() {
	for {
		if err := cc.readReply(); err != nil {
			cc.fail(err)
			if errors.Is(err, errServerProtocol) && cc.violated != nil {
				cc.mu.Lock()
				n := len(cc.pending)
				cc.mu.Unlock()
				cc.violated(err, n)
			}
			cc.failPending()
			return
		}
	}
}

// readReply reads one simple reply or one structured reply chunk.
func (cc *clientConn) readReply() error {
	var h [structuredHeaderLen]byte
	if _, err := io.ReadFull(cc.r, h[:4]); err != nil {
		return err
	}
	switch binary.BigEndian.Uint32(h[:]) {
	case magicSimpleReply:
		if _, err := io.ReadFull(cc.r, h[4:simpleReplyLen]); err != nil {
			return err
		}
		return cc.simpleReply(binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:]))
	case magicStructuredReply:
		if !cc.info.structured {
			return protocolError("structured reply that was not negotiated")
		}
		if _, err := io.ReadFull(cc.r, h[4:]); err != nil {
			return err
		}
		return cc.chunk(binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:]),
			binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[16:]))
	}
	return protocolError("bad reply magic %#x", binary.BigEndian.Uint32(h[:]))
}

// lookup finds the request a reply answers.
func (cc *clientConn) lookup(cookie uint64) (*call, error) {
	cc.mu.Lock()
	cl := cc.pending[cookie]
	cc.mu.Unlock()
	if cl == nil {
		return nil, protocolError("reply to unknown cookie %d", cookie)
	}
	return cl, nil
}

// finish completes a request.
func (cc *clientConn) finish(cookie uint64, cl *call) {
	cc.mu.Lock()
	delete(cc.pending, cookie)
	if len(cc.pending) == 0 {
		cc.c.SetReadDeadline(time.Time{}) // idle: no reply is late
	} else if now := time.Now(); now.Sub(cc.armedAt) > cc.deadlineSlack() {
		cc.armDeadline(now) // a reply came: the others have IOTimeout again
	}
	cc.mu.Unlock()
	close(cl.done)
}

func (cc *clientConn) simpleReply(code uint32, cookie uint64) error {
	cl, err := cc.lookup(cookie)
	if err != nil {
		return err
	}
	if code != 0 {
		// (A simple error reply to a read under structured replies is
		// against the protocol too, but harmless: no data follows it,
		// the replies stay in step, and the read fails as it should.)
		cl.err = &RemoteError{Op: commandName(cl.typ), Errno: wireErrno(code)}
	} else if cl.typ == cmdRead {
		if cc.info.structured {
			return protocolError("simple reply with data to a read under structured replies")
		}
		if _, err := io.ReadFull(cc.r, cl.buf); err != nil {
			return err
		}
	}
	cc.finish(cookie, cl)
	return nil
}

// Structured reply chunk types the client reads beyond proto.go's.
const (
	replyTypeOffsetHole  = 2
	replyTypeErrorOffset = 1<<15 + 2
)

// chunk reads one structured reply chunk of length bytes.
func (cc *clientConn) chunk(flags, typ uint16, cookie uint64, length uint32) error {
	cl, err := cc.lookup(cookie)
	if err != nil {
		return err
	}
	switch {
	case typ == replyTypeNone:
		if length != 0 || flags&replyFlagDone == 0 {
			return protocolError("NBD_REPLY_TYPE_NONE with a payload or without DONE")
		}
	case typ == replyTypeOffsetData || typ == replyTypeOffsetHole:
		if err := cc.readChunk(cl, typ, length); err != nil {
			return err
		}
	case typ&(1<<15) != 0:
		if err := cc.errorChunk(cl, typ, length); err != nil {
			return err
		}
	default:
		return protocolError("structured reply chunk type %d", typ)
	}
	if flags&replyFlagDone != 0 {
		if cl.err == nil && cl.typ == cmdRead && cl.got != uint64(cl.length) {
			return protocolError("read of %d bytes answered with %d", cl.length, cl.got)
		}
		cc.finish(cookie, cl)
	}
	return nil
}

// readChunk reads an OFFSET_DATA or OFFSET_HOLE chunk into its read.
func (cc *clientConn) readChunk(cl *call, typ uint16, length uint32) error {
	var b [12]byte
	hdr := 8
	if typ == replyTypeOffsetHole {
		hdr = 12
	}
	if cl.typ != cmdRead || length < uint32(hdr) || typ == replyTypeOffsetHole && length != 12 {
		return protocolError("data chunk of %d bytes to a %s", length, commandName(cl.typ))
	}
	if _, err := io.ReadFull(cc.r, b[:hdr]); err != nil {
		return err
	}
	off := binary.BigEndian.Uint64(b[:])
	n := uint64(length) - 8
	if typ == replyTypeOffsetHole {
		n = uint64(binary.BigEndian.Uint32(b[8:]))
	}
	if off < cl.offset || n > uint64(cl.length) || off-cl.offset > uint64(cl.length)-n || n == 0 {
		return protocolError("chunk of %d bytes at %d outside the read of %d at %d", n, off, cl.length, cl.offset)
	}
	dst := cl.buf[off-cl.offset:][:n]
	cl.got += n
	if typ == replyTypeOffsetHole {
		clear(dst)
		return nil
	}
	_, err := io.ReadFull(cc.r, dst)
	return err
}

// errorChunk reads an ERROR or ERROR_OFFSET chunk (or an error type this
// client does not know, which the protocol says to treat as an error).
// The chunk must hold an error (not 0) and, for ERROR and ERROR_OFFSET,
// nothing after the message but ERROR_OFFSET's offset, which must lie in
// the request's range.
func (cc *clientConn) errorChunk(cl *call, typ uint16, length uint32) error {
	if length < structuredErrorLength || length > MaxStringBytes+16 {
		return protocolError("error chunk of %d bytes", length)
	}
	p := make([]byte, length)
	if _, err := io.ReadFull(cc.r, p); err != nil {
		return err
	}
	code := binary.BigEndian.Uint32(p)
	msgLen := int(binary.BigEndian.Uint16(p[4:]))
	rest := len(p) - structuredErrorLength - msgLen
	switch {
	case rest < 0:
		return protocolError("error message of %d bytes in a chunk of %d", msgLen, length)
	case code == 0:
		return protocolError("error chunk without an error (type %d) to a %s", typ, commandName(cl.typ))
	case typ == replyTypeError && rest != 0:
		return protocolError("error chunk of %d bytes with a message of %d", length, msgLen)
	case typ == replyTypeErrorOffset:
		if rest != 8 {
			return protocolError("error at an offset in a chunk of %d bytes with a message of %d", length, msgLen)
		}
		off := binary.BigEndian.Uint64(p[len(p)-8:])
		if cl.typ == cmdFlush || off < cl.offset || off-cl.offset >= uint64(cl.length) {
			return protocolError("error at an offset (%d) outside the %s of %d bytes at %d",
				off, commandName(cl.typ), cl.length, cl.offset)
		}
	}
	if cl.err == nil {
		cl.err = &RemoteError{Op: commandName(cl.typ), Errno: wireErrno(binary.BigEndian.Uint32(p)),
			Msg: truncate(p[structuredErrorLength : structuredErrorLength+msgLen])}
	}
	return nil
}

// isConnLost reports whether err is a request lost with its connection.
func isConnLost(err error) bool {
	var lost *connLostError
	return errors.As(err, &lost)
}
