package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestClientFlushAcrossCrash: with multi-conn, a write acknowledged on one
// connection, then the server crashes (every connection drops, its cache
// with them) while a flush is in flight on another. The flush goes through
// on a new connection, but the write may be gone: Flush must fail with
// EIO, whichever connection the retry took.
func TestClientFlushAcrossCrash(t *testing.T) {
	var mu sync.Mutex
	var conns []net.Conn
	crashed := false
	uri := fakeServer(t, func(c net.Conn, r *bufio.Reader) {
		if !fakeMultiConn(c, r) {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		var h [requestHeaderLen]byte
		for {
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return
			}
			req, err := parseRequest(h[:])
			if err != nil {
				return
			}
			if req.typ == cmdWrite {
				if _, err := io.CopyN(io.Discard, r, int64(req.length)); err != nil {
					return
				}
			}
			mu.Lock()
			crash := req.typ == cmdFlush && !crashed
			if crash { // the crash: every connection drops, unanswered
				crashed = true
				for _, o := range conns {
					o.Close()
				}
			}
			mu.Unlock()
			if crash {
				return
			}
			reply := simpleBytes(0, req.cookie)
			if req.typ == cmdRead {
				reply = append(reply, make([]byte, req.length)...)
			}
			c.Write(reply)
		}
	})
	c := dialT(t, uri, ClientOptions{Connections: 4, GiveUp: 10 * time.Second, IOTimeout: 5 * time.Second})
	if c.Multi() != 4 {
		t.Fatalf("%d connections, want 4", c.Multi())
	}
	if _, err := c.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	err := c.Flush()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("Flush across a server crash: %v, want EIO (the acknowledged write may be lost)", err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("the Flush after: %v", err)
	}
}

// fakeMultiConn negotiates like fakeNegotiate (simple replies), with a
// 1 MiB export offering flush and multi-conn.
func fakeMultiConn(c net.Conn, r *bufio.Reader) bool {
	greet := binary.BigEndian.AppendUint64(nil, magicInit)
	greet = binary.BigEndian.AppendUint64(greet, magicIHaveOpt)
	c.Write(binary.BigEndian.AppendUint16(greet, flagFixedNew|flagNoZeroes))
	var cf [4]byte
	if _, err := io.ReadFull(r, cf[:]); err != nil {
		return false
	}
	for {
		opt, _, err := readOption(r, nil)
		if err != nil {
			return false
		}
		if opt != optGo {
			writeOptReply(c, opt, repErrUnsup, nil)
			continue
		}
		info := binary.BigEndian.AppendUint16(nil, infoExport)
		info = binary.BigEndian.AppendUint64(info, 1<<20)
		info = binary.BigEndian.AppendUint16(info, FlagHasFlags|FlagSendFlush|FlagCanMultiConn)
		writeOptReply(c, opt, repInfo, info)
		writeOptReply(c, opt, repAck, nil)
		return true
	}
}
