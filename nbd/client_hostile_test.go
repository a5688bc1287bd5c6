package nbd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer listens on a unix socket and runs serve on each connection.
func fakeServer(t *testing.T, serve func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return "nbd+unix:///?socket=" + sock
}

// fakeHandshake answers the client's options: STRUCTURED_REPLY refused
// (simple replies only), GO with a 1 MiB export.
func fakeHandshake(c net.Conn, r *bufio.Reader) bool {
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
		switch opt {
		case optGo:
			info := binary.BigEndian.AppendUint16(nil, infoExport)
			info = binary.BigEndian.AppendUint64(info, 1<<20)
			info = binary.BigEndian.AppendUint16(info, FlagHasFlags|FlagSendFlush)
			writeOptReply(c, opt, repInfo, info)
			writeOptReply(c, opt, repAck, nil)
			return true
		default:
			writeOptReply(c, opt, repErrUnsup, nil)
		}
	}
}

func TestClientHostileServer(t *testing.T) {
	reply := func(answer func(cookie uint64) []byte) func(net.Conn, *bufio.Reader) {
		return func(c net.Conn, r2 *bufio.Reader) {
			if !fakeHandshake(c, r2) {
				return
			}
			var h [requestHeaderLen]byte
			for {
				if _, err := io.ReadFull(r2, h[:]); err != nil {
					return
				}
				c.Write(answer(binary.BigEndian.Uint64(h[8:])))
			}
		}
	}
	simple := func(code uint32, cookie uint64) []byte {
		b := make([]byte, simpleReplyLen)
		putSimpleHeader(b, code, cookie)
		return b
	}
	cases := map[string]func(net.Conn, *bufio.Reader){
		"garbage greeting": func(c net.Conn, r *bufio.Reader) { c.Write([]byte(strings.Repeat("garbage!", 8))) },
		"closes at once":   func(c net.Conn, r *bufio.Reader) {},
		"garbage reply":    reply(func(uint64) []byte { return []byte(strings.Repeat("\xff", 64)) }),
		"unknown cookie":   reply(func(cookie uint64) []byte { return simple(0, cookie+1000) }),
		"unasked structured chunk": reply(func(cookie uint64) []byte {
			b := make([]byte, structuredHeaderLen)
			putStructuredHeader(b, replyFlagDone, replyTypeNone, cookie, 0)
			return b
		}),
		"never answers": reply(func(uint64) []byte { select {} }),
		"short data":    reply(func(cookie uint64) []byte { return append(simple(0, cookie), 1, 2, 3) }),
	}
	for name, serve := range cases {
		t.Run(name, func(t *testing.T) {
			uri := fakeServer(t, serve)
			done := make(chan error, 1)
			go func() {
				c, err := Dial(uri, ClientOptions{GiveUp: time.Second, IOTimeout: 500 * time.Millisecond})
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				_, err = c.ReadAt(make([]byte, 4096), 0)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("the client read from a hostile server without an error")
				}
				t.Logf("error: %v", err)
			case <-time.After(2 * time.Minute):
				t.Fatal("the client hangs on a hostile server")
			}
		})
	}
}

// TestClientExportNameFallback: a server that does not know NBD_OPT_GO
// (answers NBD_REP_ERR_UNSUP) is opened with NBD_OPT_EXPORT_NAME, and
// reads and writes reach it.
func TestClientExportNameFallback(t *testing.T) {
	disk := make([]byte, 1<<20)
	var mu sync.Mutex
	var gotName string
	uri := fakeServer(t, func(c net.Conn, r *bufio.Reader) {
		greet := binary.BigEndian.AppendUint64(nil, magicInit)
		greet = binary.BigEndian.AppendUint64(greet, magicIHaveOpt)
		c.Write(binary.BigEndian.AppendUint16(greet, flagFixedNew)) // no NO_ZEROES: 124 zeroes follow
		var cf [4]byte
		if _, err := io.ReadFull(r, cf[:]); err != nil {
			return
		}
		for {
			opt, data, err := readOption(r, nil)
			if err != nil {
				return
			}
			if opt == optExportName {
				mu.Lock()
				gotName = string(data)
				mu.Unlock()
				b := binary.BigEndian.AppendUint64(nil, uint64(len(disk)))
				b = binary.BigEndian.AppendUint16(b, FlagHasFlags|FlagSendFlush)
				c.Write(append(b, make([]byte, exportNamePad)...))
				break
			}
			writeOptReply(c, opt, repErrUnsup, nil)
		}
		serveSimple(c, r, disk, &mu)
	})
	c, err := Dial(strings.Replace(uri, ":///", ":///vol1", 1), ClientOptions{GiveUp: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mu.Lock()
	name := gotName
	mu.Unlock()
	if c.Size() != int64(len(disk)) || name != "vol1" {
		t.Fatalf("size %d, export name %q; want %d and vol1", c.Size(), name, len(disk))
	}
	p := []byte("written through NBD_OPT_EXPORT_NAME")
	if _, err := c.WriteAt(p, 5000); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	stored := string(disk[5000:][:len(p)])
	mu.Unlock()
	back := make([]byte, len(p))
	if _, err := c.ReadAt(back, 5000); err != nil || stored != string(p) || string(back) != string(p) {
		t.Fatalf("round trip: stored %q, read %q, %v", stored, back, err)
	}
}

// serveSimple answers reads and writes on disk with simple replies.
func serveSimple(c net.Conn, r *bufio.Reader, disk []byte, mu *sync.Mutex) {
	var h [requestHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		req, err := parseRequest(h[:])
		if err != nil || req.offset+uint64(req.length) > uint64(len(disk)) {
			return
		}
		reply := make([]byte, simpleReplyLen)
		putSimpleHeader(reply, 0, req.cookie)
		mu.Lock()
		span := disk[req.offset:][:req.length]
		switch req.typ {
		case cmdRead:
			reply = append(reply, span...)
		case cmdWrite:
			if _, err := io.ReadFull(r, span); err != nil {
				mu.Unlock()
				return
			}
		}
		mu.Unlock()
		c.Write(reply)
	}
}

// TestClientShutdownRetried: a server that answers ESHUTDOWN (it is
// going away) has the request sent again on a new connection.
func TestClientShutdownRetried(t *testing.T) {
	disk := []byte(strings.Repeat("data", 1<<18))
	var mu sync.Mutex
	conns := 0
	uri := fakeServer(t, func(c net.Conn, r *bufio.Reader) {
		if !fakeHandshake(c, r) {
			return
		}
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		if !first {
			serveSimple(c, r, disk, &mu)
			return
		}
		var h [requestHeaderLen]byte
		for {
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return
			}
			b := make([]byte, simpleReplyLen)
			putSimpleHeader(b, errShutdown, binary.BigEndian.Uint64(h[8:]))
			c.Write(b)
		}
	})
	c, err := Dial(uri, ClientOptions{GiveUp: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, 4096)
	if _, err := c.ReadAt(p, 8); err != nil || string(p[:8]) != "datadata" {
		t.Fatalf("ReadAt after ESHUTDOWN: %q, %v", p[:8], err)
	}
}
