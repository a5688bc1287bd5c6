package nbd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
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
