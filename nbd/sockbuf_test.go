package nbd

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

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
	sndbuf := func() int {
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
