package ublk

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// memPayload plays the kernel's side of the data copy.
type memPayload struct {
	in  []byte // data of a WRITE request
	out []byte // what a READ request delivered
}

func (p *memPayload) buffer(n int) []byte    { return make([]byte, n) }
func (p *memPayload) load(buf []byte) error  { copy(buf, p.in); return nil }
func (p *memPayload) store(buf []byte) error { p.out = append([]byte(nil), buf...); return nil }
func (p *memPayload) release(buf []byte)     {}

func desc(op uint32, sector uint64, sectors uint32) ioDesc {
	return ioDesc{opFlags: op, startSector: sector, nrSectors: sectors}
}

func TestServeWriteRead(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	h := newHandler(dev, false, false, nil)
	in := bytes.Repeat([]byte("luksd-ublk!"), 745)[:8192]
	if res := h.serve(desc(opWrite, 24, 16), &memPayload{in: in}); res != 8192 {
		t.Fatalf("write result %d, want 8192", res)
	}
	if !bytes.Equal(dev.Bytes()[24*512:24*512+8192], in) {
		t.Fatal("write landed in the wrong place")
	}
	p := &memPayload{}
	if res := h.serve(desc(opRead, 24, 16), p); res != 8192 {
		t.Fatalf("read result %d, want 8192", res)
	}
	if !bytes.Equal(p.out, in) {
		t.Fatal("read returned other data than written")
	}
	// the flags above the op byte do not change the op
	p = &memPayload{}
	if res := h.serve(desc(opRead|ioFlagFUA, 24, 1), p); res != 512 || !bytes.Equal(p.out, in[:512]) {
		t.Fatalf("read with flags: result %d", res)
	}
}

func TestServeRangeChecks(t *testing.T) {
	h := newHandler(devtest.NewMem(1<<20), false, false, nil)
	last := uint64(1<<20>>9) - 1
	if res := h.serve(desc(opRead, last, 1), &memPayload{}); res != 512 {
		t.Errorf("read of the last sector: %d", res)
	}
	if res := h.serve(desc(opRead, last, 2), &memPayload{}); res != -int32(syscall.EIO) {
		t.Errorf("read past the end: %d, want -EIO", res)
	}
	if res := h.serve(desc(opWrite, 1<<40, 1), &memPayload{in: make([]byte, 512)}); res != -int32(syscall.EIO) {
		t.Errorf("write far past the end: %d, want -EIO", res)
	}
}

func TestServeFlushAndErrors(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	dev := devtest.NewErring(mem)
	h := newHandler(dev, false, false, nil)
	if res := h.serve(desc(opFlush, 0, 0), &memPayload{}); res != 0 || mem.Flushes() != 1 {
		t.Fatalf("flush: result %d, %d flushes", res, mem.Flushes())
	}
	dev.Fail(devtest.OpFlush, fmt.Errorf("backend: %w", syscall.ENOSPC))
	if res := h.serve(desc(opFlush, 0, 0), &memPayload{}); res != -int32(syscall.ENOSPC) {
		t.Errorf("flush error: %d, want -ENOSPC", res)
	}
	dev.Fail(devtest.OpWrite, errors.New("no errno here"))
	if res := h.serve(desc(opWrite, 0, 1), &memPayload{in: make([]byte, 512)}); res != -int32(syscall.EIO) {
		t.Errorf("write error: %d, want -EIO", res)
	}
	if res := h.serve(desc(opWriteSame, 0, 1), &memPayload{}); res != -int32(syscall.EOPNOTSUPP) {
		t.Errorf("WRITE_SAME: %d, want -EOPNOTSUPP", res)
	}
}

func TestServeReadOnly(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	h := newHandler(dev, true, true, nil)
	if res := h.serve(desc(opWrite, 0, 1), &memPayload{in: []byte{1}}); res != -int32(syscall.EROFS) {
		t.Errorf("write on read-only: %d, want -EROFS", res)
	}
	if res := h.serve(desc(opWriteZeroes, 0, 1), &memPayload{}); res != -int32(syscall.EROFS) {
		t.Errorf("write zeroes on read-only: %d, want -EROFS", res)
	}
	if !bytes.Equal(dev.Bytes(), make([]byte, 1<<20)) {
		t.Error("read-only device was written")
	}
}

func TestServeDiscard(t *testing.T) {
	dev := devtest.NewDiscard(devtest.NewMem(1<<20), blockdev.Caps{Trim: true, WriteZeroes: true})
	if res := newHandler(dev, false, false, nil).serve(desc(opDiscard, 8, 16), &memPayload{}); res != -int32(syscall.EOPNOTSUPP) {
		t.Errorf("discard without --allow-discards: %d", res)
	}
	h := newHandler(dev, false, true, nil)
	if res := h.serve(desc(opDiscard, 8, 16), &memPayload{}); res != 0 {
		t.Fatalf("discard: %d", res)
	}
	if got := dev.Trims(); !slices.Equal(got, []devtest.Range{{Off: 4096, Len: 8192}}) {
		t.Errorf("trims %v, want [{4096 8192}] (bytes)", got)
	}
	if res := h.serve(desc(opWriteZeroes, 16, 8), &memPayload{}); res != 0 {
		t.Fatalf("write zeroes: %d", res)
	}
	if got := dev.Zeroed(); !slices.Equal(got, []devtest.Range{{Off: 8192, Len: 4096}}) {
		t.Errorf("zeroed %v, want [{8192 4096}]", got)
	}
}

// Without a ZeroWriter, write zeroes is written out in chunks.
func TestServeWriteZeroesEmulated(t *testing.T) {
	dev := devtest.MemOf(bytes.Repeat([]byte{0xa5}, 2<<20))
	h := newHandler(dev, false, false, nil)
	start, sectors := uint64(3), uint32((zeroChunk+zeroChunk/2)>>9)
	if res := h.serve(desc(opWriteZeroes, start, sectors), &memPayload{}); res != 0 {
		t.Fatalf("write zeroes: %d", res)
	}
	lo, hi := int(start)*512, int(start)*512+int(sectors)*512
	for i, b := range dev.Bytes() {
		want := byte(0xa5)
		if i >= lo && i < hi {
			want = 0
		}
		if b != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b, want)
		}
	}
}

// Failed requests are logged with what failed and why: the first ten, then
// one in a thousand.
func TestServeFailuresLogged(t *testing.T) {
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	dev.Fail(devtest.OpRead, errors.New("injected failure"))
	dev.Fail(devtest.OpWrite, errors.New("injected failure"))
	var lines []string
	h := newHandler(dev, false, false, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	for range 12 {
		if res := h.serve(desc(opRead, 8, 2), &memPayload{}); res != -int32(syscall.EIO) {
			t.Fatalf("failing read: result %d, want -EIO", res)
		}
	}
	if res := h.serve(desc(opWrite, 0, 1), &memPayload{in: make([]byte, 512)}); res != -int32(syscall.EIO) {
		t.Fatalf("failing write: result %d, want -EIO", res)
	}
	if len(lines) != 10 {
		t.Fatalf("%d log lines, want 10:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if want := "ublk: read of 1024 bytes at 4096 failed (1 so far): injected failure"; lines[0] != want {
		t.Fatalf("first line %q, want %q", lines[0], want)
	}
}

// Every failed flush is logged, or counted in a line that says how many
// were held back: read failures before them do not use up their lines.
func TestFlushFailuresLogged(t *testing.T) {
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	dev.Fail(devtest.OpRead, errors.New("injected read failure"))
	dev.Fail(devtest.OpFlush, errors.New("injected flush failure"))
	var log testtool.LogLines
	h := newHandler(dev, false, false, log.Logf)
	for range 12 {
		h.serve(desc(opRead, 8, 2), &memPayload{})
	}
	const flushes = 25
	for range flushes {
		if res := h.serve(desc(opFlush, 0, 0), &memPayload{}); res != -int32(syscall.EIO) {
			t.Fatalf("failing flush: result %d, want -EIO", res)
		}
	}
	h.durability.Flush() // as Stop does
	logged, suppressed := log.Accounted("injected flush failure")
	if logged == 0 || logged+suppressed != flushes {
		t.Fatalf("%d flush failures logged and %d counted as suppressed, want %d in all:\n%s",
			logged, suppressed, flushes, &log)
	}
}

// scratchMem is an in-memory device with WriteAtScratch that scribbles
// over the buffer it was handed, as the crypt layer's in-place encryption
// does, and counts the calls.
type scratchMem struct {
	*devtest.Mem
	scratched int
}

func (d *scratchMem) WriteAtScratch(p []byte, off int64) (int, error) {
	n, err := d.Mem.WriteAt(p, off)
	d.scratched++
	for i := range p {
		p[i] ^= 0xff
	}
	return n, err
}

// A write hands the request's buffer to a device's WriteAtScratch (the
// crypt layer encrypts it in place instead of copying it), in copy mode
// too, and what lands on the device is the data written.
func TestServeWriteInPlace(t *testing.T) {
	dev := &scratchMem{Mem: devtest.NewMem(1 << 20)}
	h := newHandler(dev, false, false, nil)
	in := bytes.Repeat([]byte("in place"), 512)
	if res := h.serve(desc(opWrite, 8, 8), &memPayload{in: in}); res != 4096 {
		t.Fatalf("write result %d", res)
	}
	tagBuf := make(copyPayload, 8192)
	copy(tagBuf, in)
	if res := h.serve(desc(opWrite, 64, 8), tagBuf); res != 4096 {
		t.Fatalf("copy-mode write result %d", res)
	}
	if dev.scratched != 2 {
		t.Fatalf("%d writes through WriteAtScratch, want 2", dev.scratched)
	}
	if !bytes.Equal(dev.Bytes()[8*512:8*512+4096], in) || !bytes.Equal(dev.Bytes()[64*512:64*512+4096], in) {
		t.Fatal("the device holds other data than written")
	}
}
