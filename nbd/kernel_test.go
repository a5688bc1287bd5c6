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

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// These tests drive a real /dev/nbdN. They need root and nbd.ko, which the
// VM suite has (contrib/vmtest, scenario 90) and this machine does not.
func needKernel(t *testing.T) {
	t.Helper()
	testtool.NeedKernel(t, "nbd", Available)
}

// attachTest attaches dev as /dev/nbdN over conns connections, served by
// a Server with cfg; kernelTimeout is AttachConfig.Timeout.
func attachTest(t *testing.T, dev blockdev.Device, cfg Config, conns int, kernelTimeout time.Duration) *Attachment {
	t.Helper()
	return attachServer(t, NewServer(dev, cfg), AttachConfig{Index: -1, Connections: conns, Timeout: kernelTimeout})
}

// attachServer attaches srv's device with ac (Index, Connections, Timeout,
// Reconfigure); the rest is filled in.
func attachServer(t *testing.T, srv *Server, ac AttachConfig) *Attachment {
	t.Helper()
	flags := srv.Flags()
	ac.Size = srv.Size()
	ac.ServerFlags = flags
	ac.DeadConnTimeout = 30 * time.Second
	ac.Backend = "luksd-test-" + t.Name()
	ac.Logf = t.Logf
	ac.Serve = func(c net.Conn) error { return srv.ServeTransmission(c, flags) }
	a, err := Attach(ac)
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

// loseConnections shuts every connection of a down as a dying daemon
// would, and keeps a from replacing them.
func loseConnections(t *testing.T, a *Attachment, replace bool) {
	t.Helper()
	a.mu.Lock()
	if !replace {
		a.closed = true
	}
	conns := append([]net.Conn(nil), a.conns...)
	a.mu.Unlock()
	for i, c := range conns {
		if err := shutdown(c); err != nil {
			t.Fatalf("shutting connection %d down: %v", i, err)
		}
	}
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
	w := testtool.AlignedBuffer(n)
	rand.Read(w)
	if k, err := unix.Pwrite(fd, w, off); err != nil || k != n {
		t.Fatalf("pwrite %d at %d: %d, %v", n, off, k, err)
	}
	r := testtool.AlignedBuffer(n)
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
		conns   int
		timeout time.Duration
		wantMS  int64
	}{{1, 0, 30000}, {2, 0, noTimeoutSec * 1000}, {2, 7 * time.Second, 7000}} {
		a := attachTest(t, devtest.NewMem(4<<20), Config{}, tc.conns, tc.timeout)
		name := strings.TrimPrefix(a.DevicePath(), "/dev/")
		b, err := os.ReadFile("/sys/block/" + name + "/queue/io_timeout")
		if err != nil {
			t.Fatal(err)
		}
		var ms int64
		fmt.Sscan(string(b), &ms)
		if ms != tc.wantMS {
			t.Errorf("timeout %v over %d connections: the kernel's io_timeout is %d ms, want %d", tc.timeout, tc.conns, ms, tc.wantMS)
		}
	}
}

// TestKernelReconnectsLostConnections: connections whose server end dies
// are replaced, the device keeps its data and serves on.
func TestKernelReconnectsLostConnections(t *testing.T) {
	needKernel(t)
	a := attachTest(t, devtest.NewMem(16<<20), Config{}, 2, 0)
	fd := openDirect(t, a)
	roundTrip(t, fd, 0, 64<<10)
	loseConnections(t, a, true)
	for i := range 8 {
		roundTrip(t, fd, int64(i)<<20, 128<<10)
	}
	stillAttached(t, a)
	if n := a.Reconnects(); n < 2 {
		t.Fatalf("%d reconnects after 2 connections were lost", n)
	}
}

// TestKernelResendsAfterReconnect: without a timeout, over one connection,
// a request in flight when its connection is lost is sent again on the
// connection that replaced it (nbd.ko checks every 30 s), so it is not
// lost with the connection; a slow request alone is never sent again.
func TestKernelResendsAfterReconnect(t *testing.T) {
	needKernel(t)
	mem := devtest.NewMem(16 << 20)
	hold := devtest.NewHold(mem)
	a := attachTest(t, hold, Config{}, 1, 0)
	fd := openDirect(t, a)
	roundTrip(t, fd, 3<<20, 4096)
	want := mem.Bytes()[3<<20 : 3<<20+4096]
	hold.Stall()
	read := startRead(fd, 3<<20)
	<-hold.Entered()
	loseConnections(t, a, true)
	for deadline := time.Now().Add(10 * time.Second); a.Reconnects() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lost connection was not replaced")
		}
	}
	hold.Release() // the first copy's answer goes to the dead socket
	read.check(t, want, 90*time.Second, "the read in flight on the lost connection", "never completed")
	stillAttached(t, a)
	if n := a.Reconnects(); n != 1 {
		t.Fatalf("%d reconnects, want 1", n)
	}
}

// pendingRead is a 4 KiB read of the device running in the background.
type pendingRead struct {
	got  []byte
	done chan error
}

func startRead(fd int, off int64) pendingRead {
	r := pendingRead{testtool.AlignedBuffer(4096), make(chan error, 1)}
	go func() {
		_, err := unix.Pread(fd, r.got, off)
		r.done <- err
	}()
	return r
}

// check waits up to limit for the read and checks that it returned want;
// what names the read and late says what it failed to do in time.
func (r pendingRead) check(t *testing.T, want []byte, limit time.Duration, what, late string) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(limit):
		t.Fatalf("%s %s", what, late)
	}
	if !bytes.Equal(r.got, want) {
		t.Fatalf("%s returned other data", what)
	}
}

// TestKernelRecoverTakesDeadConnections: a second server takes over a
// device whose server died (Reconfigure); sockets beyond the device's dead
// connections are dropped by the kernel and not replaced.
func TestKernelRecoverTakesDeadConnections(t *testing.T) {
	needKernel(t)
	mem := devtest.NewMem(16 << 20)
	first := attachTest(t, mem, Config{}, 1, 0)
	fd := openDirect(t, first)
	roundTrip(t, fd, 0, 4096)
	loseConnections(t, first, false)
	<-first.Done()
	second := attachServer(t, NewServer(mem, Config{}), AttachConfig{Index: first.Index(), Connections: 3, Reconfigure: true})
	roundTrip(t, fd, 1<<20, 64<<10)
	second.mu.Lock()
	dropped := 0
	for _, d := range second.dropped {
		if d {
			dropped++
		}
	}
	second.mu.Unlock()
	if dropped != 2 {
		t.Fatalf("%d of 3 sockets dropped, want 2 (the device has one connection)", dropped)
	}
	time.Sleep(time.Second)
	if n := second.Reconnects(); n != 0 {
		t.Fatalf("%d reconnects: dropped sockets were offered again", n)
	}
	stillAttached(t, second)
}

// TestKernelTimeoutReconnects: with a short kernel timeout and a stalled
// backend, the kernel drops connections and sends the request again; the
// lost connections are replaced and the request completes once the
// backend is back.
func TestKernelTimeoutReconnects(t *testing.T) {
	needKernel(t)
	mem := devtest.NewMem(16 << 20)
	hold := devtest.NewHold(mem)
	a := attachTest(t, hold, Config{}, 2, 2*time.Second)
	fd := openDirect(t, a)
	roundTrip(t, fd, 1<<20, 4096)
	want := mem.Bytes()[1<<20 : 1<<20+4096]
	hold.Stall()
	read := startRead(fd, 1<<20)
	time.Sleep(7 * time.Second)
	hold.Release()
	read.check(t, want, 60*time.Second, "the read across the stall", "did not finish a minute after the backend came back")
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
	a := attachTest(t, hold, Config{RequestTimeout: time.Second}, 2, 30*time.Second)
	fd := openDirect(t, a)
	roundTrip(t, fd, 0, 4096)
	hold.Stall()
	start := time.Now()
	_, err := unix.Pread(fd, testtool.AlignedBuffer(4096), 8192)
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
	a := attachTest(t, devtest.NewMem(4<<20), Config{}, 2, 0)
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
