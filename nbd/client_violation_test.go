package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// violator is a fake server that negotiates correctly (a 1 MiB export
// with flush and trim, and structured replies when structured is set),
// sends afterGo at once, and answers every request with answer's bytes,
// on every connection.
func violator(t *testing.T, structured bool, afterGo []byte, answer func(req testtool.NBDRequest) []byte) (uri string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	export := testtool.NBDExport{Flags: FlagSendFlush | FlagSendTrim, Structured: structured}
	uri = testtool.FakeNBD(t, func(c net.Conn, r *bufio.Reader) {
		if !testtool.NBDNegotiate(c, r, export) {
			return
		}
		conns.Add(1)
		c.Write(afterGo)
		testtool.NBDTransmit(c, r, answer)
	})
	return uri, conns
}

// TestClientProtocolViolation: a server that negotiates and then breaks
// the protocol in its replies fails the request at once with EIO and a
// log line naming what it did, instead of being redialled and asked again
// until GiveUp; and since it does so on every connection, a second
// request fails at once too. (A simple reply's length is not in its
// header: too much read data shows as a bad magic after it, too little
// as a reply that never comes, IOTimeout's business.)
func TestClientProtocolViolation(t *testing.T) {
	data := func(off uint64, n int) []byte {
		return append(binary.BigEndian.AppendUint64(nil, off), make([]byte, n)...)
	}
	errPayload := func(code uint32) []byte {
		return append(binary.BigEndian.AppendUint32(nil, code), 0, 0)
	}
	cases := []struct {
		name       string
		structured bool
		op         string // "read" (4096 bytes at 0), "write" or "flush"
		answer     func(req testtool.NBDRequest) []byte
		want       string // in the log line and the error
		afterGo    []byte // sent at once after the handshake, unasked
	}{
		{"bad magic", false, "read", func(req testtool.NBDRequest) []byte { return []byte(strings.Repeat("\xfe", 64)) }, "bad reply magic", nil},
		{"unknown cookie", false, "write", func(req testtool.NBDRequest) []byte { return simpleBytes(0, req.Cookie+1000) }, "unknown cookie", nil},
		{"chunk not negotiated", false, "flush", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeNone, req.Cookie, nil)
		}, "structured reply that was not negotiated", nil},
		{"unknown chunk type", true, "read", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, 77, req.Cookie, nil)
		}, "chunk type 77", nil},
		{"data chunk to a write", true, "write", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeOffsetData, req.Cookie, data(req.Offset, int(req.Length)))
		}, "data chunk", nil},
		{"NONE with a payload", true, "flush", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeNone, req.Cookie, []byte{1, 2, 3, 4})
		}, "NBD_REPLY_TYPE_NONE", nil},
		{"short read", true, "read", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeOffsetData, req.Cookie, data(req.Offset, int(req.Length)-512))
		}, "answered with", nil},
		{"short error chunk", true, "read", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeError, req.Cookie, []byte{0, 0, 0, 5})
		}, "error chunk of 4 bytes", nil},
		{"simple data reply to a structured read", true, "read", func(req testtool.NBDRequest) []byte {
			return simpleBytes(0, req.Cookie, make([]byte, req.Length)...)
		}, "simple reply", nil},
		{"error chunk without an error", true, "read", func(req testtool.NBDRequest) []byte {
			return chunkBytes(replyFlagDone, replyTypeError, req.Cookie, errPayload(0))
		}, "error chunk without an error", nil},
		{"ERROR_OFFSET to a flush", true, "flush", func(req testtool.NBDRequest) []byte {
			p := append(errPayload(errIO), binary.BigEndian.AppendUint64(nil, 0)...)
			return chunkBytes(replyFlagDone, replyTypeErrorOffset, req.Cookie, p)
		}, "error at an offset", nil},
		{"ERROR_OFFSET outside the read", true, "read", func(req testtool.NBDRequest) []byte {
			p := append(errPayload(errIO), binary.BigEndian.AppendUint64(nil, req.Offset+uint64(req.Length))...)
			return chunkBytes(replyFlagDone, replyTypeErrorOffset, req.Cookie, p)
		}, "error at an offset", nil},
		{"garbage after negotiation", false, "read", func(req testtool.NBDRequest) []byte {
			return simpleBytes(0, req.Cookie, make([]byte, req.Length)...)
		}, "bad reply magic", []byte("garbage!garbage!")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uri, conns := violator(t, tc.structured, tc.afterGo, tc.answer)
			var log testtool.LogLines
			c := dialT(t, uri, ClientOptions{GiveUp: 20 * time.Second, IOTimeout: 10 * time.Second, Logf: log.Logf})
			run := func() error {
				switch tc.op {
				case "write":
					_, err := c.WriteAt(make([]byte, 4096), 0)
					return err
				case "flush":
					return c.Flush()
				}
				_, err := c.ReadAt(make([]byte, 4096), 0)
				return err
			}
			for i := range 2 {
				start := time.Now()
				err := run()
				took := time.Since(start)
				if err == nil {
					t.Fatalf("request %d: no error from a server that broke the protocol", i)
				}
				if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("request %d: error %q, want EIO naming %q", i, err, tc.want)
				}
				if took > 3*time.Second {
					t.Errorf("request %d failed after %v, want at once", i, took.Round(time.Millisecond))
				}
			}
			if n := conns.Load(); n > 3 {
				t.Errorf("%d connections for 2 requests", n)
			}
			lines := log.Lines()
			found := 0
			for _, l := range lines {
				if strings.Contains(l, "protocol") && strings.Contains(l, tc.want) {
					found++
				}
			}
			if len(lines) > 0 {
				t.Logf("log: %s", lines[0])
			}
			if found == 0 {
				t.Errorf("no log line naming the violation %q; log:\n%s", tc.want, strings.Join(lines, "\n"))
			}
		})
	}
}
