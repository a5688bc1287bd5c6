package nbd

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
)

// inUse is the server-wide payload budget taken.
func (s *Server) inUse() int64 {
	s.budget.mu.Lock()
	defer s.budget.mu.Unlock()
	return s.budget.limit - s.budget.avail
}

// TestStalledConnectionsDoNotStarveOthers is issue 10's case with the
// default budgets: eight connections queue reads of the largest size and
// never read the replies. A ninth client's 4 KiB read must still be
// answered, while the eight are still connected (the write timeout is far
// away): their own budgets stop them first.
func TestStalledConnectionsDoNotStarveOthers(t *testing.T) {
	sock, srv := serveMem(t, devtest.Hollow(64<<20), Config{IOTimeout: 10 * time.Minute})
	for range 8 {
		deaf := dialGo(t, sock, "")
		deaf.c.SetDeadline(time.Time{})
		deaf.c.(*net.UnixConn).SetReadBuffer(4096)
		for i := range 4 {
			deaf.send(t, requestBytes(cmdRead, 0, uint64(i), 0, defaultMaxRequest))
		}
	}
	// Wait until the deaf connections hold all they will get.
	for settled, last := 0, int64(-1); settled < 5; {
		time.Sleep(100 * time.Millisecond)
		n := srv.inUse()
		if n == last && n >= defaultTotalFlight-defaultMaxRequest {
			settled++
		} else {
			settled = 0
		}
		last = n
	}
	c := dialGo(t, sock, "")
	c.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, code := c.read(t, 4096, 4096); code != 0 {
		t.Fatalf("read: error %d", code)
	}
	srv.mu.Lock()
	n := len(srv.sessions)
	srv.mu.Unlock()
	if n != 9 {
		t.Fatalf("%d sessions after the read, want the 8 stalled ones and the reader", n)
	}
}

// TestSlowReaderKeepsItsConnection: the write timeout drops a client that
// takes nothing, not one that takes its replies slowly: a reply far larger
// than the socket buffers, read a piece at a time with pauses shorter than
// the timeout, arrives whole although it takes several timeouts in all.
func TestSlowReaderKeepsItsConnection(t *testing.T) {
	const size = 16 << 20
	sock, _ := serveMem(t, devtest.Hollow(size), Config{IOTimeout: time.Second, MaxRequest: size})
	c := dialGo(t, sock, "")
	c.c.SetDeadline(time.Time{})
	c.send(t, requestBytes(cmdRead, 0, 7, 0, size))
	start := time.Now()
	var hdr [simpleReplyLen]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if code := binary.BigEndian.Uint32(hdr[4:]); code != 0 {
		t.Fatalf("error %d", code)
	}
	piece := make([]byte, 512<<10)
	for got := 0; got < size; got += len(piece) {
		time.Sleep(200 * time.Millisecond)
		if _, err := io.ReadFull(c.r, piece); err != nil {
			t.Fatalf("after %d of %d bytes in %v: %v", got, size, time.Since(start), err)
		}
	}
	if b, code := c.read(t, 0, 512); code != 0 || len(b) != 512 {
		t.Fatalf("the next read: %d bytes, error %d", len(b), code)
	}
}
