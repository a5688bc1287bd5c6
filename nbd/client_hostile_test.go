package nbd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

func TestClientHostileServer(t *testing.T) {
	reply := func(answer func(cookie uint64) []byte) func(net.Conn, *bufio.Reader) {
		return func(c net.Conn, r *bufio.Reader) {
			if testtool.NBDNegotiate(c, r, simpleExport) {
				testtool.NBDTransmit(c, r, func(req testtool.NBDRequest) []byte { return answer(req.Cookie) })
			}
		}
	}
	cases := map[string]func(net.Conn, *bufio.Reader){
		"garbage greeting": func(c net.Conn, r *bufio.Reader) { c.Write([]byte(strings.Repeat("garbage!", 8))) },
		"closes at once":   func(c net.Conn, r *bufio.Reader) {},
		"garbage reply":    reply(func(uint64) []byte { return []byte(strings.Repeat("\xff", 64)) }),
		"unknown cookie":   reply(func(cookie uint64) []byte { return simpleBytes(0, cookie+1000) }),
		"unasked structured chunk": reply(func(cookie uint64) []byte {
			return chunkBytes(replyFlagDone, replyTypeNone, cookie, nil)
		}),
		"never answers": reply(func(uint64) []byte { select {} }),
		"short data":    reply(func(cookie uint64) []byte { return simpleBytes(0, cookie, 1, 2, 3) }),
	}
	for name, serve := range cases {
		t.Run(name, func(t *testing.T) {
			uri := testtool.FakeNBD(t, serve)
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
	uri := testtool.FakeNBD(t, func(c net.Conn, r *bufio.Reader) {
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
		testtool.NBDTransmit(c, r, diskAnswer(disk, &mu))
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

// TestClientShutdownRetried: a server that answers ESHUTDOWN (it is
// going away) has the request sent again on a new connection.
func TestClientShutdownRetried(t *testing.T) {
	disk := []byte(strings.Repeat("data", 1<<18))
	var mu sync.Mutex
	conns := 0
	uri := testtool.FakeNBD(t, func(c net.Conn, r *bufio.Reader) {
		if !testtool.NBDNegotiate(c, r, simpleExport) {
			return
		}
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		answer := diskAnswer(disk, &mu)
		if first {
			answer = func(req testtool.NBDRequest) []byte { return simpleBytes(errShutdown, req.Cookie) }
		}
		testtool.NBDTransmit(c, r, answer)
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
