package ublk

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// These tests drive a real ublk device. They need root and ublk_drv, which
// the VM suite has (contrib/vmtest, scenario 65) and this machine and CI do
// not.
func needKernel(t *testing.T) {
	t.Helper()
	testtool.NeedKernel(t, "ublk", func() error {
		_, err := os.Stat(ControlPath)
		return err
	})
}

// kernelDev is the in-memory device the kernel tests serve: Mem with
// Trim and WriteZeroes offered, the ranges recorded.
type kernelDev struct {
	*devtest.Discard
	mem *devtest.Mem
}

func newKernelDev(size int) kernelDev {
	mem := devtest.NewMem(size)
	return kernelDev{devtest.NewDiscard(mem, blockdev.Caps{Trim: true, WriteZeroes: true}), mem}
}

func startDevice(t *testing.T, dev blockdev.Device, opts Options) *Device {
	t.Helper()
	opts.ID = -1
	d, err := New(dev, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := d.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return d
}

func testDataPath(t *testing.T, opts Options) {
	needKernel(t)
	dev := newKernelDev(32 << 20)
	d := startDevice(t, dev, opts)
	t.Logf("%s: flags %#x, user copy %v", d.Path(), d.Flags(), d.UserCopy())
	fd, err := unix.Open(d.Path(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		d.Stop()
		t.Fatalf("open %s: %v", d.Path(), err)
	}
	for _, c := range []struct{ off, n int }{{0, 4096}, {1 << 20, 128 << 10}, {32<<20 - 8192, 8192}, {5 << 20, 1 << 20}} {
		w := testtool.AlignedBuffer(c.n)
		rand.Read(w)
		if n, err := unix.Pwrite(fd, w, int64(c.off)); err != nil || n != c.n {
			t.Fatalf("pwrite %d at %d: %d, %v", c.n, c.off, n, err)
		}
		if !bytes.Equal(dev.mem.Bytes()[c.off:c.off+c.n], w) {
			t.Fatalf("write of %d at %d did not reach the device there", c.n, c.off)
		}
		r := testtool.AlignedBuffer(c.n)
		if n, err := unix.Pread(fd, r, int64(c.off)); err != nil || n != c.n {
			t.Fatalf("pread %d at %d: %d, %v", c.n, c.off, n, err)
		}
		if !bytes.Equal(r, w) {
			t.Fatalf("read of %d at %d differs from what was written", c.n, c.off)
		}
	}
	flushes := dev.mem.Flushes()
	if err := unix.Fsync(fd); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	if dev.mem.Flushes() == flushes {
		t.Error("fsync on the block device did not reach Flush")
	}
	if opts.AllowDiscards {
		r := [2]uint64{2 << 20, 1 << 20}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&r))); e != 0 {
			t.Fatalf("BLKDISCARD: %v", e)
		}
		if len(dev.Trims()) == 0 {
			t.Error("BLKDISCARD did not reach Trim")
		}
	}
	unix.Close(fd)
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if _, err := os.Stat(d.Path()); err == nil {
		t.Errorf("%s still exists after Stop", d.Path())
	}
}

func TestKernelUserCopy(t *testing.T) { testDataPath(t, Options{AllowDiscards: true}) }
func TestKernelCopyMode(t *testing.T) { testDataPath(t, Options{CopyMode: true}) }

// abandon drops the device the way a killed daemon does: the queues stop
// without STOP_DEV and their rings, the character device and the control
// channel close, through the same teardown as abort.
func (d *Device) abandon() {
	d.stopQueues(0)
	d.ctrl.close()
}

// A daemon that goes away leaves the block device; I/O issued meanwhile
// waits, and a new daemon (Recover) serves it and the device goes on.
func TestKernelRecover(t *testing.T) {
	needKernel(t)
	dev := newKernelDev(16 << 20)
	d := startDevice(t, dev, Options{})
	fd, err := unix.Open(d.Path(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	d.abandon()

	w := testtool.AlignedBuffer(64 << 10)
	rand.Read(w)
	wrote := make(chan error, 1)
	go func() {
		n, err := unix.Pwrite(fd, w, 3<<20)
		if err == nil && n != len(w) {
			err = fmt.Errorf("short write %d", n)
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("write completed with no daemon: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	d2, err := Recover(d.ID(), dev, Options{})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("write held across recovery: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("write held across recovery never completed")
	}
	if !bytes.Equal(dev.mem.Bytes()[3<<20:3<<20+len(w)], w) {
		t.Fatal("the write held across recovery did not land")
	}
	r := testtool.AlignedBuffer(len(w))
	if _, err := unix.Pread(fd, r, 3<<20); err != nil || !bytes.Equal(r, w) {
		t.Fatalf("read after recovery: %v", err)
	}
	unix.Close(fd)
	fd = -1
	if err := d2.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// A device nobody recovers is removed by DeleteAbandoned: the I/O the
// kernel held fails instead of waiting forever. A served device is refused.
func TestKernelDeleteAbandoned(t *testing.T) {
	needKernel(t)
	dev := newKernelDev(16 << 20)
	d := startDevice(t, dev, Options{})
	if err := DeleteAbandoned(d.ID()); !errors.Is(err, ErrServed) {
		d.Stop()
		t.Fatalf("DeleteAbandoned on a served device: %v, want ErrServed", err)
	}
	fd, err := unix.Open(d.Path(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	d.abandon()
	done := make(chan error, 1)
	go func() {
		_, err := unix.Pread(fd, testtool.AlignedBuffer(4096), 0)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	waitAbandoned(t, d.ID())
	if err := DeleteAbandoned(d.ID()); err != nil {
		t.Fatalf("DeleteAbandoned: %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("a read held by the abandoned device succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held read never ended")
	}
	if _, err := os.Stat(d.Path()); err == nil {
		t.Errorf("%s still exists", d.Path())
	}
}

// waitAbandoned waits until the kernel has given up on device id's
// abandoned queues: it cancels the closed rings' commands from io_uring's
// ring exit work, after the close returned, and only then does the device
// leave the live state. Until it has, DeleteAbandoned called by the
// process that served the device (alive: the test) reports ErrServed.
func waitAbandoned(t *testing.T, id int) {
	t.Helper()
	c, err := openControl("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.devInfo(uint32(id))
		if err != nil {
			t.Fatalf("device %d: %v", id, err)
		}
		if info.state != stateLive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("device %d still live 30 s after its queues were abandoned", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Queues that stop while requests keep coming, their rings closed under
// them (a killed daemon; Stop when STOP_DEV fails): the kernel cancels the
// queues' commands and the held requests fail at DeleteAbandoned. On Linux
// 6.12 a ring closed while its queue thread lives on (the process's main
// thread, which Go parks instead of ending) let ublk_drv complete a
// command twice, a request having just landed on it, and the machine
// crashed. Whether one lands in that moment is timing: several rounds.
func TestKernelAbandonUnderIO(t *testing.T) {
	needKernel(t)
	for round := range 8 {
		dev := newKernelDev(8 << 20)
		d := startDevice(t, dev, Options{})
		id := d.ID()
		fd, err := unix.Open(d.Path(), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != nil {
			d.Stop()
			t.Fatal(err)
		}
		// Should the round fail, the held reads must still end, or the
		// test process could not exit.
		t.Cleanup(func() { DeleteAbandoned(id) })
		var served atomic.Int64
		var readers sync.WaitGroup
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				buf := testtool.AlignedBuffer(4096)
				for {
					if _, err := unix.Pread(fd, buf, mrand.Int64N(2048)*4096); err != nil {
						return // the device went away: the end of the round
					}
					served.Add(1)
				}
			}()
		}
		for deadline := time.Now().Add(30 * time.Second); served.Load() == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no read served in 30 s", round)
			}
			time.Sleep(time.Millisecond)
		}
		// abandon while reads keep landing on the queues
		time.Sleep(time.Duration(mrand.IntN(50)) * time.Millisecond)
		d.abandon()
		waitAbandoned(t, id)
		if err := DeleteAbandoned(id); err != nil {
			t.Fatalf("round %d: DeleteAbandoned: %v", round, err)
		}
		ended := make(chan struct{})
		go func() { readers.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: reads held by the abandoned device never ended", round)
		}
		unix.Close(fd)
		if _, err := os.Stat(d.Path()); err == nil {
			t.Errorf("round %d: %s still exists after DeleteAbandoned", round, d.Path())
		}
	}
}
