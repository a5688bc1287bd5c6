package nbd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// These tests drive a real /dev/nbdN. They need root and nbd.ko, which the
// VM suite has (contrib/vmtest, scenario 90) and this machine does not.
func needKernel(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (not a pass): the nbd kernel tests need root")
	}
	if err := Available(); err != nil {
		t.Skipf("SKIP (not a pass): %v; the nbd kernel tests run in the VM suite", err)
	}
}

// attachTest attaches dev as /dev/nbdN over two connections, served by a
// Server with cfg; kernelTimeout is AttachConfig.Timeout.
func attachTest(t *testing.T, dev blockdev.Device, cfg Config, kernelTimeout time.Duration) *Attachment {
	t.Helper()
	srv := NewServer(dev, cfg)
	flags := srv.Flags()
	a, err := Attach(AttachConfig{
		Index:           -1,
		Size:            dev.Size(),
		ServerFlags:     flags,
		Connections:     2,
		Timeout:         kernelTimeout,
		DeadConnTimeout: 30 * time.Second,
		Backend:         "luksd-test-" + t.Name(),
		Logf:            t.Logf,
		Serve:           func(c net.Conn) error { return srv.ServeTransmission(c, flags) },
	})
	if err != nil {
		srv.Close()
		t.Fatalf("Attach: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Detach(); err != nil {
			t.Errorf("Detach: %v", err)
		}
		srv.Close()
	})
	return a
}

// alignedBuf returns a buffer aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off : off+n]
}

// openDirect opens the device for O_DIRECT reads and writes.
func openDirect(t *testing.T, a *Attachment) int {
	t.Helper()
	fd, err := unix.Open(a.DevicePath(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", a.DevicePath(), err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// roundTrip writes random data at off through fd and reads it back.
func roundTrip(t *testing.T, fd int, off int64, n int) {
	t.Helper()
	w := alignedBuf(n)
	rand.Read(w)
	if k, err := unix.Pwrite(fd, w, off); err != nil || k != n {
		t.Fatalf("pwrite %d at %d: %d, %v", n, off, k, err)
	}
	r := alignedBuf(n)
	if k, err := unix.Pread(fd, r, off); err != nil || k != n {
		t.Fatalf("pread %d at %d: %d, %v", n, off, k, err)
	}
	if !bytes.Equal(r, w) {
		t.Fatalf("read at %d differs from what was written", off)
	}
}

func stillAttached(t *testing.T, a *Attachment) {
	t.Helper()
	select {
	case <-a.Done():
		t.Fatalf("the attachment ended: %v", a.Wait())
	default:
	}
}

// shutdown shuts a connection down as a dying peer would.
func shutdown(c net.Conn) error {
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_RDWR) }); err != nil {
		return err
	}
	return serr
}

// TestKernelTimeoutsSetDeliberately: without a timeout the kernel is told
// the longest one it can hold, not 0, which nbd.ko takes as 30 s and then
// drops connections of a multi-connection device.
func TestKernelTimeoutsSetDeliberately(t *testing.T) {
	needKernel(t)
	for _, tc := range []struct {
		timeout time.Duration
		wantMS  int64
	}{{0, noTimeoutSec * 1000}, {7 * time.Second, 7000}} {
		a := attachTest(t, devtest.NewMem(4<<20), Config{}, tc.timeout)
		name := strings.TrimPrefix(a.DevicePath(), "/dev/")
		b, err := os.ReadFile("/sys/block/" + name + "/queue/io_timeout")
		if err != nil {
			t.Fatal(err)
		}
		var ms int64
		fmt.Sscan(string(b), &ms)
		if ms != tc.wantMS {
			t.Errorf("timeout %v: the kernel's io_timeout is %d ms, want %d", tc.timeout, ms, tc.wantMS)
		}
	}
}

// TestKernelReconnectsLostConnections: connections whose server end dies
// are replaced, the device keeps its data and serves on.
func TestKernelReconnectsLostConnections(t *testing.T) {
	needKernel(t)
	a := attachTest(t, devtest.NewMem(16<<20), Config{}, 0)
	fd := openDirect(t, a)
	roundTrip(t, fd, 0, 64<<10)
	a.mu.Lock()
	conns := append([]net.Conn(nil), a.conns...)
	a.mu.Unlock()
	for i, c := range conns {
		if err := shutdown(c); err != nil {
			t.Fatalf("shutting connection %d down: %v", i, err)
		}
	}
	for i := range 8 {
		roundTrip(t, fd, int64(i)<<20, 128<<10)
	}
	stillAttached(t, a)
	if n := a.Reconnects(); n < len(conns) {
		t.Fatalf("%d reconnects after %d connections were lost", n, len(conns))
	}
}

// TestKernelTimeoutReconnects: with a short kernel timeout and a stalled
// backend, the kernel drops connections and sends the request again; the
// lost connections are replaced and the request completes once the
// backend is back.
func TestKernelTimeoutReconnects(t *testing.T) {
	needKernel(t)
	mem := devtest.NewMem(16 << 20)
	hold := devtest.NewHold(mem)
	a := attachTest(t, hold, Config{}, 2*time.Second)
	fd := openDirect(t, a)
	roundTrip(t, fd, 1<<20, 4096)
	want := mem.Bytes()[1<<20 : 1<<20+4096]
	hold.Stall()
	done := make(chan error, 1)
	got := alignedBuf(4096)
	go func() {
		_, err := unix.Pread(fd, got, 1<<20)
		done <- err
	}()
	time.Sleep(7 * time.Second)
	hold.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read across the stall: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("read across the stall did not finish a minute after the backend came back")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read across the stall returned other data")
	}
	if a.Reconnects() == 0 {
		t.Fatal("the kernel timed the stalled request out, yet no connection was replaced")
	}
	stillAttached(t, a)
	roundTrip(t, fd, 2<<20, 64<<10)
}

// TestKernelRequestTimeoutFailsRequest: the server's RequestTimeout fails
// a stalled request with EIO before the kernel's timeout; no connection
// is lost and the device serves on.
func TestKernelRequestTimeoutFailsRequest(t *testing.T) {
	needKernel(t)
	hold := devtest.NewHold(devtest.NewMem(16 << 20))
	a := attachTest(t, hold, Config{RequestTimeout: time.Second}, 30*time.Second)
	fd := openDirect(t, a)
	roundTrip(t, fd, 0, 4096)
	hold.Stall()
	start := time.Now()
	_, err := unix.Pread(fd, alignedBuf(4096), 8192)
	took := time.Since(start)
	hold.Release()
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("read of a stalled backend: %v after %v, want EIO", err, took)
	}
	t.Logf("EIO after %v", took)
	roundTrip(t, fd, 4<<20, 64<<10)
	stillAttached(t, a)
	if n := a.Reconnects(); n != 0 {
		t.Fatalf("%d connections replaced; the server's timeout should have kept them", n)
	}
}

// TestKernelDisconnectEndsAttachment: a disconnect from outside (as
// nbd-client -d) ends the attachment; nothing is reconnected.
func TestKernelDisconnectEndsAttachment(t *testing.T) {
	needKernel(t)
	a := attachTest(t, devtest.NewMem(4<<20), Config{}, 0)
	if err := Disconnect(a.Index()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the attachment did not end after a disconnect")
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("Wait after a disconnect: %v", err)
	}
	if n := a.Reconnects(); n != 0 {
		t.Fatalf("%d connections replaced after a disconnect", n)
	}
}
