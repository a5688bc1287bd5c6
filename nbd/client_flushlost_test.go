package nbd

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
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
	export := testtool.NBDExport{Flags: FlagSendFlush | FlagCanMultiConn}
	uri := testtool.FakeNBD(t, func(c net.Conn, r *bufio.Reader) {
		if !testtool.NBDNegotiate(c, r, export) {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		testtool.NBDTransmit(c, r, func(req testtool.NBDRequest) []byte {
			mu.Lock()
			defer mu.Unlock()
			if req.Type == cmdFlush && !crashed { // the crash: every connection drops, unanswered
				crashed = true
				for _, o := range conns {
					o.Close()
				}
				return nil
			}
			reply := simpleBytes(0, req.Cookie)
			if req.Type == cmdRead {
				reply = append(reply, make([]byte, req.Length)...)
			}
			return reply
		})
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
