package nbd

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
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

// TestKernelTimeoutSent: no timeout is sent as the longest the kernel can
// hold, never as 0 (which nbd.ko takes for 30 s); others in whole seconds,
// rounded up.
func TestKernelTimeoutSent(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want uint64
	}{{0, noTimeoutSec}, {-time.Second, noTimeoutSec}, {7 * time.Second, 7}, {1500 * time.Millisecond, 2}, {1000 * time.Hour, noTimeoutSec}} {
		r := AttachConfig{Size: 1 << 20, Timeout: tc.d}.request([]uint32{3})
		if r.TimeoutSec != tc.want {
			t.Errorf("Timeout %v sent as %d s, want %d", tc.d, r.TimeoutSec, tc.want)
		}
	}
	if noTimeoutSec*1000 >= 1<<32 {
		t.Fatalf("%d s does not fit the kernel's unsigned jiffies at HZ=1000", noTimeoutSec)
	}
}
