package ublk

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// TestBackendErrnos: every backend error is completed with the errno whose
// block status means the same (see errno), for every request type.
func TestBackendErrnos(t *testing.T) {
	const (
		eio      = -int32(syscall.EIO)
		enospc   = -int32(syscall.ENOSPC)
		erofs    = -int32(syscall.EROFS)
		enotsupp = -int32(syscall.EOPNOTSUPP)
	)
	for _, tc := range []struct {
		err error
		// want per request: read, write, flush, discard, write zeroes
		read, write, flush, discard, zeroes int32
	}{
		{syscall.EIO, eio, eio, eio, eio, eio},
		{devtest.AsOpError(syscall.EIO), eio, eio, eio, eio, eio},
		{errors.New("the disk caught fire"), eio, eio, eio, eio, eio},
		{syscall.EAGAIN, eio, eio, eio, eio, eio},
		{syscall.EBUSY, eio, eio, eio, eio, eio},
		{syscall.ENOMEM, eio, eio, eio, eio, eio},
		{fmt.Errorf("store: %w", syscall.ETIMEDOUT), eio, eio, eio, eio, eio},
		{syscall.ENOLINK, eio, eio, eio, eio, eio},
		{syscall.ENODEV, eio, eio, eio, eio, eio},
		{syscall.EINVAL, eio, eio, eio, eio, eio},
		{devtest.AsOpError(blockdev.ErrOutOfRange), eio, eio, eio, eio, eio},
		{devtest.AsOpError(syscall.ENOSPC), enospc, enospc, enospc, enospc, enospc},
		{syscall.EDQUOT, enospc, enospc, enospc, enospc, enospc},
		{syscall.EFBIG, enospc, enospc, enospc, enospc, enospc},
		{blockdev.ErrReadOnly, erofs, erofs, erofs, erofs, erofs},
		{syscall.EROFS, erofs, erofs, erofs, erofs, erofs},
		{syscall.EPERM, erofs, erofs, erofs, erofs, erofs},
		// An impossible discard is a hint ignored; write zeroes are then
		// written out.
		{blockdev.ErrNotSupported, enotsupp, enotsupp, enotsupp, 0, 0},
		{devtest.AsOpError(syscall.EOPNOTSUPP), enotsupp, enotsupp, enotsupp, 0, 0},
	} {
		dev := devtest.NewErring(devtest.NewMem(1 << 20))
		h := newHandler(dev, false, true, nil)
		dev.FailAll(tc.err)
		if got := h.serve(desc(opRead, 0, 1), &memPayload{}); got != tc.read {
			t.Errorf("%v: read %d, want %d", tc.err, got, tc.read)
		}
		if got := h.serve(desc(opWrite, 0, 1), &memPayload{in: make([]byte, 512)}); got != tc.write {
			t.Errorf("%v: write %d, want %d", tc.err, got, tc.write)
		}
		if got := h.serve(desc(opFlush, 0, 0), &memPayload{}); got != tc.flush {
			t.Errorf("%v: flush %d, want %d", tc.err, got, tc.flush)
		}
		if got := h.serve(desc(opDiscard, 0, 8), &memPayload{}); got != tc.discard {
			t.Errorf("%v: discard %d, want %d", tc.err, got, tc.discard)
		}
		dev.Fail(devtest.OpWrite, nil) // emulated write zeroes must be able to write
		if got := h.serve(desc(opWriteZeroes, 0, 8), &memPayload{}); got != tc.zeroes {
			t.Errorf("%v: write zeroes %d, want %d", tc.err, got, tc.zeroes)
		}
	}
}

// TestFlushFailsEveryTime: a failing flush is reported for as long as the
// backend fails it, not once.
func TestFlushFailsEveryTime(t *testing.T) {
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	h := newHandler(dev, false, false, nil)
	dev.Fail(devtest.OpFlush, &blockdev.OpError{Op: "flush", Path: "/dev/sdz", Err: syscall.EIO})
	for i := range 3 {
		if got := h.serve(desc(opFlush, 0, 0), &memPayload{}); got != -int32(syscall.EIO) {
			t.Fatalf("flush %d: %d, want -EIO", i+1, got)
		}
	}
	dev.Fail(devtest.OpFlush, nil)
	if got := h.serve(desc(opFlush, 0, 0), &memPayload{}); got != 0 {
		t.Fatalf("flush after healing: %d", got)
	}
}

// TestDiscardFollowsCaps: a device that has Trim but says it passes no
// discards down (the crypt layer without --allow-discards on the backend)
// is not offered discards.
func TestDiscardFollowsCaps(t *testing.T) {
	h := newHandler(noTrimDevice{devtest.NewErring(devtest.NewMem(1 << 20))}, false, true, nil)
	if h.trim != nil {
		t.Fatal("discards served although Caps().Trim is false")
	}
	if got := h.serve(desc(opDiscard, 0, 8), &memPayload{}); got != -int32(syscall.EOPNOTSUPP) {
		t.Fatalf("discard: %d, want -EOPNOTSUPP", got)
	}
}

type noTrimDevice struct{ *devtest.Erring }

func (noTrimDevice) Caps() blockdev.Caps { return blockdev.Caps{} }

// TestFUAWrite: a write the kernel flags FUA goes to the device's own
// durable write, and the device advertises FUA only when it has one.
func TestFUAWrite(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	dev := devtest.NewFUA(mem)
	h := newHandler(dev, false, false, nil)
	d := desc(opWrite, 0, 1)
	d.opFlags |= ioFlagFUA
	if got := h.serve(d, &memPayload{in: make([]byte, 512)}); got != 512 {
		t.Fatalf("FUA write: %d", got)
	}
	if dev.FUAWrites() != 1 || mem.Flushes() != 1 {
		t.Fatalf("FUA write: %d durable writes, %d flushes below; want 1 and 1", dev.FUAWrites(), mem.Flushes())
	}
	if got := h.serve(desc(opWrite, 0, 1), &memPayload{in: make([]byte, 512)}); got != 512 || dev.FUAWrites() != 1 {
		t.Fatalf("plain write: %d, %d durable writes", got, dev.FUAWrites())
	}
	for _, tc := range []struct {
		dev  blockdev.Device
		want bool
	}{{dev, true}, {mem, false}} {
		h := newHandler(tc.dev, false, false, nil)
		p, err := buildParams(geometry{size: h.size, blockSize: 512, maxIOBytes: 1 << 20, fua: h.fua != nil})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.basic.attrs&attrFUA != 0; got != tc.want {
			t.Errorf("%T: FUA advertised %v, want %v", tc.dev, got, tc.want)
		}
	}
}
