package nbd

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseDevicePath(t *testing.T) {
	good := map[string]int{"/dev/nbd0": 0, "/dev/nbd15": 15, "nbd3": 3, "/dev/nbd120": 120}
	for in, want := range good {
		if got, err := ParseDevicePath(in); err != nil || got != want {
			t.Errorf("ParseDevicePath(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/dev/nbd", "/dev/sda", "/dev/nbd1p1", "/dev/nbd-1", "/dev/nbd01", "nbdx"} {
		if got, err := ParseDevicePath(in); err == nil {
			t.Errorf("ParseDevicePath(%q) = %d; want an error", in, got)
		}
	}
	if DevicePath(4) != "/dev/nbd4" {
		t.Fatal(DevicePath(4))
	}
}

func TestAttachValidates(t *testing.T) {
	serve := func(net.Conn) error { return nil }
	bad := []AttachConfig{
		{Size: 1 << 20},                                             // no Serve
		{Size: 0, Serve: serve},                                     // no size
		{Size: 1 << 20, BlockSize: 1000, Serve: serve},              // not a power of two
		{Size: 1 << 20, BlockSize: 8192, Serve: serve},              // too large
		{Size: 1<<20 + 512, BlockSize: 4096, Serve: serve},          // not a multiple
		{Size: 1 << 20, Index: -1, Reconfigure: true, Serve: serve}, // reconfigure needs an index
	}
	for _, c := range bad {
		if _, err := Attach(c); err == nil {
			t.Errorf("Attach(%+v) succeeded", c)
		} else if errors.Is(err, ErrNoKernelNBD) {
			t.Errorf("Attach(%+v) reached the kernel: %v", c, err)
		}
	}
}

// TestAvailableSaysWhy checks that Available either finds nbd.ko (loading
// it) or says in one line that the kernel has none.
func TestAvailableSaysWhy(t *testing.T) {
	err := Available()
	if err == nil {
		if _, serr := os.Stat("/sys/module/nbd"); serr != nil {
			t.Fatalf("Available() = nil but nbd is not loaded: %v", serr)
		}
		return
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("multi-line error: %q", err)
	}
	if _, serr := os.Stat("/sys/module/nbd"); serr != nil && !errors.Is(err, ErrNoKernelNBD) {
		t.Fatalf("nbd is not loaded, want ErrNoKernelNBD, got %v", err)
	}
	t.Logf("no kernel NBD here: %v", err)
}

// TestTimeoutSentToKernel: no timeout is 0 for a single connection (nbd.ko
// then waits for ever), and over several the longest the kernel can hold,
// never 0 (which nbd.ko then takes for 30 s); others in whole seconds,
// rounded up.
func TestTimeoutSentToKernel(t *testing.T) {
	for _, tc := range []struct {
		d     time.Duration
		want  uint64
		conns int
	}{{0, noTimeoutSec, 2}, {-time.Second, noTimeoutSec, 4}, {0, 0, 1}, {7 * time.Second, 7, 1}, {7 * time.Second, 7, 2},
		{1500 * time.Millisecond, 2, 2}, {1000 * time.Hour, noTimeoutSec, 2}} {
		r := AttachConfig{Size: 1 << 20, Timeout: tc.d}.request(make([]uint32, tc.conns))
		if r.TimeoutSec != tc.want {
			t.Errorf("Timeout %v over %d connections sent as %d s, want %d", tc.d, tc.conns, r.TimeoutSec, tc.want)
		}
	}
	if noTimeoutSec*1000 >= 1<<32 {
		t.Fatalf("%d s does not fit the kernel's unsigned jiffies at HZ=1000", noTimeoutSec)
	}
}

// TestPeerClosed: a unix socket whose other end is closed reads as closed,
// one with an open peer (with or without data waiting) does not, and the
// data is still there afterwards.
func TestPeerClosed(t *testing.T) {
	kfd, conn, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if peerClosed(conn) {
		t.Fatal("closed while the peer is open")
	}
	unix.Write(kfd, []byte("x"))
	if peerClosed(conn) {
		t.Fatal("closed while data waits")
	}
	unix.Close(kfd)
	b := make([]byte, 1)
	if n, err := conn.Read(b); n != 1 || err != nil {
		t.Fatalf("the data was consumed: %d, %v", n, err)
	}
	if !peerClosed(conn) {
		t.Fatal("open after the peer closed")
	}
	conn.Close()
	if !peerClosed(conn) {
		t.Fatal("open after this end closed")
	}
}
