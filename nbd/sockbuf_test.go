package nbd

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev/devtest"
)

// sendBuffer reads a connection's SO_SNDBUF.
func sendBuffer(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	rc.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	return n
}

// Only the first maxGrownSendBuffers sessions get the large buffer.
func TestGrownSendBuffersCapped(t *testing.T) {
	sock, srv := serveMem(t, devtest.NewMem(1<<20), Config{})
	for range maxGrownSendBuffers + 3 {
		c := dialGo(t, sock, "")
		defer c.c.Close()
	}
	var ref net.Conn
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "socketpair")
	if ref, err = net.FileConn(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer ref.Close()
	growSendBuffer(ref)
	grown := sendBuffer(t, ref)

	// A session registers, then grows its buffer, just after the handshake
	// the client saw end: wait for all of them.
	want := maxGrownSendBuffers + 3
	var n, sessions int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		srv.mu.Lock()
		var conns []net.Conn
		for ss := range srv.sessions {
			conns = append(conns, ss.conn)
		}
		srv.mu.Unlock()
		sessions, n = len(conns), 0
		for _, c := range conns {
			if sendBuffer(t, c) == grown {
				n++
			}
		}
		if sessions == want && n == maxGrownSendBuffers {
			break
		}
	}
	if sessions != want || n != maxGrownSendBuffers {
		t.Errorf("%d of %d sessions have the %d-byte send buffer, want %d of %d", n, sessions, grown, maxGrownSendBuffers, want)
	}
}

func TestGrowSendBuffer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "socketpair")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sndbuf := func() int { return sendBuffer(t, c) }
	before := sndbuf()
	growSendBuffer(c)
	after := sndbuf()

	// The kernel doubles the size asked for (bookkeeping overhead) and,
	// without CAP_NET_ADMIN, caps the request at net.core.wmem_max.
	want := unixSendBuffer
	if unix.Geteuid() != 0 {
		b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
		if err != nil {
			t.Fatal(err)
		}
		wmemMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		want = min(want, wmemMax)
	}
	if after != 2*want {
		t.Errorf("SO_SNDBUF after growSendBuffer = %d, want %d (was %d)", after, 2*want, before)
	}
	if after <= before && want*2 > before {
		t.Errorf("SO_SNDBUF did not grow: %d -> %d", before, after)
	}
}
