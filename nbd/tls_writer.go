package nbd

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
)

// Replies through TLS (and a client's requests: the same holds for a
// 1 MiB write). crypto/tls seals each Write into records of at
// most 16 KiB and sends every record with its own write to the socket,
// and net.Buffers falls back to one Write per buffer on a *tls.Conn: a
// 1 MiB read reply was a 16-byte record for its header, then 64 records
// and 65 system calls. tlsReplyWriter fills records to the brim (a
// header shares its record with the start of the payload) and corks the
// socket under the TLS connection, so a whole batch of replies leaves in
// a few large writes.

// tlsRecordPayload is the most plaintext crypto/tls puts in one record
// (with DynamicRecordSizingDisabled, as LoadTLSDir sets).
const tlsRecordPayload = 16 << 10

// corkFlushAt is how much sealed data a corked socket gathers before it
// writes; loopback and LAN TCP take large writes best.
const corkFlushAt = 256 << 10

// corkedConn is the socket under a server's TLS connection. Normally it
// passes writes through; between cork and uncork it gathers them and
// writes them in corkFlushAt pieces.
type corkedConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
	err    error // a failed write: later ones fail too
}

func (c *corkedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(b)
	}
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, b...)
	if len(c.buf) >= corkFlushAt {
		c.flushLocked()
	}
	return len(b), c.err
}

// corkBuffers hold what corked sockets gather; a connection holds one
// only while it writes a batch, so idle connections cost no buffer.
var corkBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, corkFlushAt+2*tlsRecordPayload)
	return &b
}}

func (c *corkedConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.buf = (*corkBuffers.Get().(*[]byte))[:0]
	c.mu.Unlock()
}

// uncork writes what was gathered and lets later writes through.
func (c *corkedConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	c.flushLocked()
	b := c.buf
	corkBuffers.Put(&b)
	c.buf = nil
	err := c.err
	c.err = nil
	return err
}

func (c *corkedConn) flushLocked() {
	if len(c.buf) > 0 && c.err == nil {
		_, c.err = c.Conn.Write(c.buf)
	}
	c.buf = c.buf[:0]
}

// tlsReplyWriter writes a session's replies through TLS (see above).
type tlsReplyWriter struct {
	tc      *tls.Conn
	raw     *corkedConn
	scratch []byte // one record's plaintext: small pieces and a payload's head
}

// replyWriter is what a session writes its replies (and a client its
// requests) to: c itself, or for a TLS connection over a corkedConn, a
// tlsReplyWriter.
func replyWriter(c net.Conn) io.Writer {
	if tc, ok := c.(*tls.Conn); ok {
		if raw, ok := tc.NetConn().(*corkedConn); ok {
			return &tlsReplyWriter{tc: tc, raw: raw}
		}
	}
	return c
}

// buffersWriter writes a batch of pieces its own way, consuming what it
// wrote (as net.Buffers.WriteTo does).
type buffersWriter interface {
	WriteBuffers(bufs *net.Buffers) (int64, error)
}

func (w *tlsReplyWriter) Write(b []byte) (int, error) {
	bufs := net.Buffers{b}
	n, err := w.WriteBuffers(&bufs)
	return int(n), err
}

// WriteBuffers seals bufs into full records: pieces smaller than a record
// and the head of the next piece are gathered into one record; the rest
// of a large piece goes to crypto/tls as it is, in whole records. A TLS
// connection that failed a write stays failed, so what was consumed after
// an error does not matter.
func (w *tlsReplyWriter) WriteBuffers(bufs *net.Buffers) (int64, error) {
	w.raw.cork()
	var n int64
	var err error
	for len(*bufs) > 0 && err == nil {
		rec := w.scratch[:0]
		for len(*bufs) > 0 && len(rec) < tlsRecordPayload {
			b := (*bufs)[0]
			k := min(len(b), tlsRecordPayload-len(rec))
			rec = append(rec, b[:k]...)
			consume(bufs, k)
		}
		w.scratch = rec[:0]
		var k int
		k, err = w.tc.Write(rec)
		n += int64(k)
		if err != nil || len(*bufs) == 0 {
			break
		}
		if b := (*bufs)[0]; len(b) >= tlsRecordPayload {
			whole := len(b) / tlsRecordPayload * tlsRecordPayload
			k, err = w.tc.Write(b[:whole])
			n += int64(k)
			consume(bufs, whole)
		}
	}
	if uerr := w.raw.uncork(); err == nil {
		err = uerr
	}
	return n, err
}

// consume drops the first k bytes of bufs[0], and bufs[0] once empty.
func consume(bufs *net.Buffers, k int) {
	(*bufs)[0] = (*bufs)[0][k:]
	if len((*bufs)[0]) == 0 {
		*bufs = (*bufs)[1:]
	}
}
