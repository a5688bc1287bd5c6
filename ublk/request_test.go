package ublk

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// memDevice is an in-memory blockdev.Device that records calls.
type memDevice struct {
	mu       sync.Mutex
	data     []byte
	flushes  int
	flushErr error
	writeErr error
}

func (m *memDevice) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(p, m.data[off:]), nil
}

func (m *memDevice) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writeErr != nil {
		return 0, m.writeErr
	}
	return copy(m.data[off:], p), nil
}

func (m *memDevice) Size() int64 { return int64(len(m.data)) }

func (m *memDevice) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes++
	return m.flushErr
}

func (m *memDevice) Close() error { return nil }

// trimDevice adds Trim and WriteZeroes, recording the ranges.
type trimDevice struct {
	memDevice
	trims, zeroed [][2]int64
}

func (d *trimDevice) Trim(off, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.trims = append(d.trims, [2]int64{off, n})
	return nil
}

func (d *trimDevice) WriteZeroes(off, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.zeroed = append(d.zeroed, [2]int64{off, n})
	return nil
}

func (d *trimDevice) trimmed() [][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][2]int64(nil), d.trims...)
}

func (m *memDevice) flushCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushes
}

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
	dev := &memDevice{data: make([]byte, 1<<20)}
	h := newHandler(dev, false, false, nil)
	in := bytes.Repeat([]byte("luksd-ublk!"), 745)[:8192]
	if res := h.serve(desc(opWrite, 24, 16), &memPayload{in: in}); res != 8192 {
		t.Fatalf("write result %d, want 8192", res)
	}
	if !bytes.Equal(dev.data[24*512:24*512+8192], in) {
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
	dev := &memDevice{data: make([]byte, 1<<20)}
	h := newHandler(dev, false, false, nil)
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
	dev := &memDevice{data: make([]byte, 1<<20)}
	h := newHandler(dev, false, false, nil)
	if res := h.serve(desc(opFlush, 0, 0), &memPayload{}); res != 0 || dev.flushes != 1 {
		t.Fatalf("flush: result %d, %d flushes", res, dev.flushes)
	}
	dev.flushErr = fmt.Errorf("backend: %w", syscall.ENOSPC)
	if res := h.serve(desc(opFlush, 0, 0), &memPayload{}); res != -int32(syscall.ENOSPC) {
		t.Errorf("flush error: %d, want -ENOSPC", res)
	}
	dev.writeErr = errors.New("no errno here")
	if res := h.serve(desc(opWrite, 0, 1), &memPayload{in: make([]byte, 512)}); res != -int32(syscall.EIO) {
		t.Errorf("write error: %d, want -EIO", res)
	}
	if res := h.serve(desc(opWriteSame, 0, 1), &memPayload{}); res != -int32(syscall.EOPNOTSUPP) {
		t.Errorf("WRITE_SAME: %d, want -EOPNOTSUPP", res)
	}
}

func TestServeReadOnly(t *testing.T) {
	dev := &memDevice{data: make([]byte, 1<<20)}
	h := newHandler(dev, true, true, nil)
	if res := h.serve(desc(opWrite, 0, 1), &memPayload{in: []byte{1}}); res != -int32(syscall.EROFS) {
		t.Errorf("write on read-only: %d, want -EROFS", res)
	}
	if res := h.serve(desc(opWriteZeroes, 0, 1), &memPayload{}); res != -int32(syscall.EROFS) {
		t.Errorf("write zeroes on read-only: %d, want -EROFS", res)
	}
	if dev.data[0] != 0 {
		t.Error("read-only device was written")
	}
}

func TestServeDiscard(t *testing.T) {
	dev := &trimDevice{memDevice: memDevice{data: make([]byte, 1<<20)}}
	if res := newHandler(dev, false, false, nil).serve(desc(opDiscard, 8, 16), &memPayload{}); res != -int32(syscall.EOPNOTSUPP) {
		t.Errorf("discard without --allow-discards: %d", res)
	}
	h := newHandler(dev, false, true, nil)
	if res := h.serve(desc(opDiscard, 8, 16), &memPayload{}); res != 0 {
		t.Fatalf("discard: %d", res)
	}
	if len(dev.trims) != 1 || dev.trims[0] != [2]int64{4096, 8192} {
		t.Errorf("trims %v, want [[4096 8192]] (bytes)", dev.trims)
	}
	if res := h.serve(desc(opWriteZeroes, 16, 8), &memPayload{}); res != 0 {
		t.Fatalf("write zeroes: %d", res)
	}
	if len(dev.zeroed) != 1 || dev.zeroed[0] != [2]int64{8192, 4096} {
		t.Errorf("zeroed %v, want [[8192 4096]]", dev.zeroed)
	}
}

// Without a ZeroWriter, write zeroes is written out in chunks.
func TestServeWriteZeroesEmulated(t *testing.T) {
	dev := &memDevice{data: bytes.Repeat([]byte{0xa5}, 2<<20)}
	h := newHandler(dev, false, false, nil)
	start, sectors := uint64(3), uint32((zeroChunk+zeroChunk/2)>>9)
	if res := h.serve(desc(opWriteZeroes, start, sectors), &memPayload{}); res != 0 {
		t.Fatalf("write zeroes: %d", res)
	}
	lo, hi := int(start)*512, int(start)*512+int(sectors)*512
	for i, b := range dev.data {
		want := byte(0xa5)
		if i >= lo && i < hi {
			want = 0
		}
		if b != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b, want)
		}
	}
}

func TestBufferPool(t *testing.T) {
	p := newBufferPool(512 << 10)
	for _, n := range []int{1, 512, 4096, 4097, 65536, 512 << 10} {
		b := p.get(n)
		if len(b) != n {
			t.Fatalf("get(%d) has length %d", n, len(b))
		}
		if c := cap(b); c < n || c&(c-1) != 0 {
			t.Fatalf("get(%d) has capacity %d", n, c)
		}
		p.put(b)
	}
	// larger than the largest class: a plain allocation, not pooled
	if b := p.get(1 << 21); len(b) != 1<<21 {
		t.Fatalf("oversized get has length %d", len(b))
	}
}

// failingDevice fails every read and write.
type failingDevice struct{ memDevice }

func (*failingDevice) ReadAt([]byte, int64) (int, error)  { return 0, errors.New("injected failure") }
func (*failingDevice) WriteAt([]byte, int64) (int, error) { return 0, errors.New("injected failure") }

// Failed requests are logged with what failed and why: the first ten, then
// one in a thousand.
func TestServeFailuresLogged(t *testing.T) {
	dev := &failingDevice{memDevice{data: make([]byte, 1<<20)}}
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
