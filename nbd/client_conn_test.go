package nbd

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingWriter counts the batches a connection writes.
type countingWriter struct {
	w       io.Writer
	batches atomic.Int32
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	cw.batches.Add(1)
	return cw.w.Write(b)
}

func (cw *countingWriter) WriteBuffers(bufs *net.Buffers) (int64, error) {
	cw.batches.Add(1)
	return bufs.WriteTo(cw.w)
}

// TestClientRequestsCombined: requests made while another is being
// written queue and leave in one batch, each with its own payload.
func TestClientRequestsCombined(t *testing.T) {
	const n, size = 16, 512
	client, server := net.Pipe()
	defer server.Close()
	cc := newClientConn(client, bufio.NewReader(client), exportInfo{}, 10*time.Second, nil)
	defer cc.close()
	cw := &countingWriter{w: client}
	cc.w = cw

	serverErr := make(chan error, 1)
	go func() {
		// Read nothing until every other request has queued behind the
		// first one's write (net.Pipe: a write waits for its reader).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			cc.wmu.Lock()
			queued := len(cc.queue)
			cc.wmu.Unlock()
			if queued == n-1 {
				break
			}
			if time.Now().After(deadline) {
				serverErr <- fmt.Errorf("%d requests queued, want %d", queued, n-1)
				server.Close()
				return
			}
		}
		r := bufio.NewReader(server)
		var h [requestHeaderLen]byte
		payload := make([]byte, size)
		for range n {
			if _, err := io.ReadFull(r, h[:]); err != nil {
				serverErr <- err
				return
			}
			req, _ := parseRequest(h[:])
			if _, err := io.ReadFull(r, payload); err != nil {
				serverErr <- err
				return
			}
			if want := bytes.Repeat([]byte{byte(req.offset / size)}, size); !bytes.Equal(payload, want) {
				serverErr <- fmt.Errorf("the write at %d carried another's payload", req.offset)
				return
			}
			var reply [simpleReplyLen]byte
			putSimpleHeader(reply[:], 0, req.cookie)
			server.Write(reply[:])
		}
		serverErr <- nil
	}()

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte(i)}, size)
			errs[i] = cc.roundTrip(cmdWrite, 0, uint64(i*size), size, p, nil)
		})
		if i == 0 {
			// The first request is the writer, stuck until the server
			// reads: the others find it writing.
			for cw.batches.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	wg.Wait()
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if b := cw.batches.Load(); b != 2 {
		t.Fatalf("%d requests went out in %d writes, want 2 (the first, then the rest at once)", n, b)
	}
}

// TestClientQueuedWriteLost: a write queued behind a writer that fails
// returns (connection lost) only once the writer has let go of its
// payload, and nothing hangs.
func TestClientQueuedWriteLost(t *testing.T) {
	client, server := net.Pipe()
	cc := newClientConn(client, bufio.NewReader(client), exportInfo{}, 10*time.Second, nil)
	cw := &countingWriter{w: client}
	cc.w = cw
	errs := make(chan error, 2)
	for i := range 2 {
		go func() { errs <- cc.roundTrip(cmdWrite, 0, 0, 512, make([]byte, 512), nil) }()
		if i == 0 {
			for cw.batches.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		cc.wmu.Lock()
		queued := len(cc.queue)
		cc.wmu.Unlock()
		if queued == 1 {
			break
		}
		if time.Now().After(deadline) {
			server.Close()
			t.Fatal("the second write did not queue behind the first")
		}
	}
	server.Close() // the writer's write fails; the queued one is never written
	for range 2 {
		select {
		case err := <-errs:
			if !isConnLost(err) {
				t.Fatalf("a write on a lost connection returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write on a lost connection hangs")
		}
	}
	if b := cw.batches.Load(); b != 1 {
		t.Fatalf("%d writes after the connection failed, want none", b-1)
	}
}
