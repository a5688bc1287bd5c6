package ublk

import (
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// copyModeQueue is a queue without a ring, in copy mode, whose requests
// are served by its methods as the queue thread and workers serve them.
func copyModeQueue(t *testing.T, h *handler, depth int) *queue {
	q := &queue{depth: depth, h: h, inline: true, bufs: make([][]byte, depth)}
	for i := range q.bufs {
		q.bufs[i] = make([]byte, 64<<10)
	}
	var err error
	if q.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(q.wakeFD) })
	return q
}

// A panic in a request served on a worker, or on the queue thread, is
// completed with EIO, logged with the request (a stack once), and fails
// the device: later writes, write zeroes and discards complete with EIO,
// reads and flushes are served.
func TestQueueRequestPanic(t *testing.T) {
	eio := -int32(syscall.EIO)
	var log testtool.LogLines
	mem := devtest.NewMem(1 << 20)
	dev := devtest.NewPanicking(mem)
	dev.PanicOn(devtest.FaultWrite, 65536, 4096)
	dev.PanicOn(devtest.FaultRead, 8192, 512)
	h := newHandler(devtest.NewDiscard(dev, blockdev.Caps{Trim: true, WriteZeroes: true}), false, true, log.Logf)
	q := copyModeQueue(t, h, 4)

	copy(q.bufs[0], "before")
	if res := q.handle(0, desc(opWrite, 0, 1)); res != 512 {
		t.Fatalf("write before the panic: %d", res)
	}
	// on a worker, as a request over 64 KiB or with Options.Workers
	q.workers.Add(1)
	q.serve(1, desc(opWrite, 128, 8))
	if len(q.finished) != 1 || q.finished[0] != (finished{1, eio}) {
		t.Fatalf("finished after the panicking write: %+v, want tag 1 with EIO", q.finished)
	}
	if dev.Panicked() != 1 {
		t.Fatalf("%d panics, want 1", dev.Panicked())
	}
	// on the queue thread
	if res := q.handle(2, desc(opRead, 16, 1)); res != eio {
		t.Fatalf("read that panics: %d, want EIO", res)
	}
	for _, c := range []struct {
		name string
		d    ioDesc
		want int32
	}{
		{"write", desc(opWrite, 0, 1), eio},
		{"write zeroes", desc(opWriteZeroes, 0, 8), eio},
		{"discard", desc(opDiscard, 0, 8), eio},
		{"read", desc(opRead, 0, 1), 512},
		{"flush", desc(opFlush, 0, 0), 0},
	} {
		if res := q.handle(3, c.d); res != c.want {
			t.Errorf("%s after the panic: %d, want %d", c.name, res, c.want)
		}
	}
	if string(q.bufs[3][:6]) != "before" {
		t.Errorf("read after the panic: %q", q.bufs[3][:6])
	}
	if string(mem.Bytes()[:6]) != "before" {
		t.Errorf("a write after the panic changed the device: %q", mem.Bytes()[:6])
	}
	s := log.String()
	for _, want := range []string{
		"ublk: write of 4096 bytes at 65536 panicked (1 so far): devtest: injected panic in write",
		"ublk: read of 512 bytes at 8192 panicked (2 so far)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "stack of the first panic") != 1 || !strings.Contains(s, "ublk/panic.go") {
		t.Errorf("want one stack in the log:\n%s", s)
	}
}

// On a real /dev/ublkbN (the VM), a request whose handling panics fails
// with EIO instead of hanging the device, later writes fail, reads work,
// and the device stops cleanly.
func TestKernelRequestPanic(t *testing.T) {
	needKernel(t)
	mem := devtest.NewMem(8 << 20)
	dev := devtest.NewPanicking(mem)
	dev.PanicOn(devtest.FaultWrite, 1<<20, 4096)
	d := startDevice(t, dev, Options{})
	defer d.Stop()
	fd, err := unix.Open(d.Path(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", d.Path(), err)
	}
	buf := testtool.AlignedBuffer(4096)
	copy(buf, "before")
	if _, err := unix.Pwrite(fd, buf, 0); err != nil {
		t.Fatalf("write before the panic: %v", err)
	}
	if _, err := unix.Pwrite(fd, buf, 1<<20); err != unix.EIO {
		t.Fatalf("write that panics: %v, want EIO", err)
	}
	if !d.Failed() {
		t.Fatal("the device is not marked failed")
	}
	if _, err := unix.Pwrite(fd, buf, 8192); err != unix.EIO {
		t.Fatalf("write after the panic: %v, want EIO", err)
	}
	r := testtool.AlignedBuffer(4096)
	if _, err := unix.Pread(fd, r, 0); err != nil || string(r[:6]) != "before" {
		t.Fatalf("read after the panic: %q, %v", r[:6], err)
	}
	unix.Close(fd)
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
