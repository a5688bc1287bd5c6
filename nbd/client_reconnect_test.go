package nbd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestClientReconnect kills (or stops) nbdkit in the middle of a workload
// and starts it again: reads and writes carry on, the next Flush reports
// EIO (writes acknowledged before the kill were never flushed), the one
// after passes, and the file holds every write. With one connection and
// with four (multi-conn).
func TestClientReconnect(t *testing.T) {
	for _, mode := range []string{"disable", "plugin"} {
		for _, how := range []string{"kill", "sigterm"} {
			t.Run(how+"/multi-conn="+mode, func(t *testing.T) { testReconnect(t, mode, how == "kill") })
		}
	}
}

func testReconnect(t *testing.T, multiConn string, kill bool) {
	file := servedFile(t)
	uri, srv := nbdkitUnix(t, "--filter=multi-conn", "file", file, "multi-conn-mode="+multiConn)
	var logMu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	c := dialT(t, uri, ClientOptions{GiveUp: 30 * time.Second, IOTimeout: 10 * time.Second, Logf: logf})
	if want := map[string]int{"disable": 1, "plugin": defaultConnections()}[multiConn]; c.Multi() != want {
		t.Fatalf("%d connections, want %d", c.Multi(), want)
	}
	want, _ := os.ReadFile(file)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var ops atomic.Int64
	for w := range 4 {
		region := int64(w) * (1 << 20)
		wg.Go(func() {
			p, back := make([]byte, 4096), make([]byte, 4096)
			for i := 0; !stop.Load(); i++ {
				off := region + int64(i%256)*4096
				rand.Read(p)
				if _, err := c.WriteAt(p, off); err != nil {
					errs <- fmt.Errorf("WriteAt %d: %w", off, err)
					return
				}
				copy(want[off:], p) // regions are the workers' own
				if _, err := c.ReadAt(back, off); err != nil || !bytes.Equal(back, p) {
					errs <- fmt.Errorf("ReadAt %d after a write: %v (equal %v)", off, err, bytes.Equal(back, p))
					return
				}
				ops.Add(1)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	before := ops.Load()
	if kill {
		srv.Kill()
	} else {
		srv.Stop()
	}
	time.Sleep(300 * time.Millisecond)
	srv.Start()
	for deadline := time.Now().Add(30 * time.Second); ops.Load() < before+100 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ops.Load() < before+100 {
		t.Fatalf("the workload did not resume after the restart (%d ops before, %d after)", before, ops.Load())
	}
	if err := c.Flush(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Flush after a dropped connection with unflushed writes: %v, want EIO", err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	got, _ := os.ReadFile(file)
	if !bytes.Equal(got, want) {
		t.Fatalf("file differs from the writes at %d", firstDiff(got, want))
	}
	// The loss and the return are in the log.
	logMu.Lock()
	defer logMu.Unlock()
	all := strings.Join(logs, "\n")
	if !strings.Contains(all, "connection lost") || !strings.Contains(all, "reconnected") {
		t.Errorf("the log does not show the lost connection and the reconnection:\n%s", all)
	}
}

// TestClientServerGone: a server that stays away turns requests into EIO
// after GiveUp, and the client redials once it is back.
func TestClientServerGone(t *testing.T) {
	file := servedFile(t)
	uri, srv := nbdkitUnix(t, "file", file)
	c := dialT(t, uri, ClientOptions{GiveUp: time.Second})
	p := make([]byte, 4096)
	if _, err := c.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	done := make(chan error, 1)
	go func() { _, err := c.ReadAt(p, 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("ReadAt with the server gone: %v, want EIO", err)
		}
	case <-time.After(2 * time.Minute): // a hang, not a slow machine
		t.Fatal("ReadAt hangs with the server gone")
	}
	srv.Start()
	// Once given up, the client dials again at most every redialMaxWait.
	var err error
	for deadline := time.Now().Add(10 * redialMaxWait); time.Now().Before(deadline); time.Sleep(redialMaxWait / 4) {
		if _, err = c.ReadAt(p, 0); err == nil {
			return
		}
	}
	t.Fatalf("ReadAt after the server came back: %v", err)
}

// TestClientServerGoneMultiConn: with several connections, GiveUp runs
// once for all of them, from when the first found the server gone: the
// request on the second connection fails at once after the first's, not
// after a GiveUp of its own.
func TestClientServerGoneMultiConn(t *testing.T) {
	file := servedFile(t)
	uri, srv := nbdkitUnix(t, "--filter=multi-conn", "file", file, "multi-conn-mode=plugin")
	const giveUp = 2 * time.Second
	c := dialT(t, uri, ClientOptions{GiveUp: giveUp, Connections: 2})
	if c.Multi() != 2 {
		t.Fatalf("%d connections, want 2", c.Multi())
	}
	p := make([]byte, 4096)
	for range 2 { // one request on each connection: both are dialled
		if _, err := c.ReadAt(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	killed := time.Now()
	var failed [2]time.Time
	for n := range 2 { // round robin: one request on each connection
		_, err := c.ReadAt(p, 0)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("ReadAt %d with the server gone: %v, want EIO", n, err)
		}
		failed[n] = time.Now()
		t.Logf("ReadAt %d failed after %v: %v", n, failed[n].Sub(killed).Round(time.Millisecond), err)
	}
	// The second connection counts from the first's finding, so its
	// request fails at once (it was given up a moment ago), not after a
	// GiveUp of its own.
	if d := failed[1].Sub(failed[0]); d > giveUp/2 {
		t.Fatalf("the second connection's request failed %v after the first's, want at once (GiveUp %v)", d, giveUp)
	}
	// The message says since when the server is gone: the first failure,
	// for both connections.
	_, err1 := c.ReadAt(p, 0)
	_, err2 := c.ReadAt(p, 0)
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Errorf("the connections disagree on since when the server is gone:\n%v\n%v", err1, err2)
	}
}
