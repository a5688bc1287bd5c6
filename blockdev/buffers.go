package blockdev

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// In-flight buffers: GetBuffer hands out page-aligned buffers, each its own
// anonymous mapping outside the Go heap, locked in memory (mlock) when the
// process may lock memory. They hold plaintext and ciphertext while a
// request is in flight, so they must never be written to swap; page
// alignment makes them fit O_DIRECT as they are. A buffer goes back with
// PutBuffer: up to maxFreeBufferBytes are kept for reuse, so a steady load
// maps nothing (mapping, locking and unmapping a buffer per request cost
// the NBD server 2/3 of its 4 KiB IOPS: an unmap stops every thread for a
// TLB flush). The budget is one NBD connection's in-flight bytes, what
// fio's 1 MiB reads at iodepth 32 keep busy. Free lists are striped by
// address so that concurrent requests do not share one lock; each stripe
// knows the buffers it mapped, so PutBuffer of anything else is harmless.
// A full stripe makes room by unmapping free buffers of other sizes,
// largest first: after a burst of large requests, small ones still find
// their buffers kept.
//
// The free lists follow the load (buffers_trim.go): what a stripe kept
// free for a whole trimInterval was not needed, and is unmapped. An idle
// daemon so holds no buffers within two intervals, and one under load
// keeps what its requests reuse.
const (
	minBufferShift     = 12 // 4 KiB: smaller requests get 4 KiB
	maxBufferShift     = 25 // 32 MiB, the largest NBD request
	maxFreeBufferBytes = 64 << 20
	bufferStripes      = 8
)

type bufferStripe struct {
	mu    sync.Mutex
	bytes int // kept free
	low   int // the fewest bytes kept free since the last trim
	lists [maxBufferShift + 1][][]byte
	owned map[uintptr]bool // buffers of this stripe, in use or free
	_     [64]byte         // keep stripes on separate cache lines
}

var buffers struct {
	stripes  [bufferStripes]bufferStripe
	next     atomic.Uint32
	unlocked atomic.Bool  // an mlock failed: some buffers are not locked
	mapped   atomic.Int64 // bytes mapped, in use or free
}

// GetBuffer returns a page-aligned buffer of length n (0 < n <= 32 MiB)
// whose capacity is a power of two of at least 4 KiB. It panics when no
// memory can be mapped, as make does.
func GetBuffer(n int) []byte {
	c := bufferClass(n)
	start := int(buffers.next.Add(1))
	for i := range bufferStripes {
		s := &buffers.stripes[(start+i)%bufferStripes]
		s.mu.Lock()
		if len(s.lists[c]) > 0 {
			b := s.pop(c)
			s.mu.Unlock()
			return b[:n]
		}
		s.mu.Unlock()
	}
	return mapBuffer(1 << c)[:n]
}

// PutBuffer gives back a buffer from GetBuffer; b must not be used again.
// Anything else is ignored.
func PutBuffer(b []byte) {
	if cap(b) == 0 {
		return
	}
	b = b[:cap(b)]
	addr, s := homeStripe(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owned[addr] {
		return
	}
	const limit = maxFreeBufferBytes / bufferStripes
	c := bufferClass(cap(b))
	if cap(b) <= limit {
		s.evictOthers(c, limit-cap(b))
	}
	if s.bytes+cap(b) <= limit {
		s.lists[c] = append(s.lists[c], b)
		s.bytes += cap(b)
		startTrimmer()
		return
	}
	s.unmap(addr, b)
}

// evictOthers unmaps free buffers of classes other than keep, largest
// first, until the stripe keeps at most room bytes or has no others left.
func (s *bufferStripe) evictOthers(keep, room int) {
	for c := maxBufferShift; c >= minBufferShift && s.bytes > room; c-- {
		for c != keep && len(s.lists[c]) > 0 && s.bytes > room {
			b := s.pop(c)
			addr, _ := homeStripe(b)
			s.unmap(addr, b)
		}
	}
}

// pop takes a free buffer of class c off its list.
func (s *bufferStripe) pop(c int) []byte {
	l := s.lists[c]
	b := l[len(l)-1]
	l[len(l)-1] = nil
	s.lists[c] = l[:len(l)-1]
	s.bytes -= cap(b)
	s.low = min(s.low, s.bytes)
	return b
}

// unmap gives a buffer of the stripe back to the kernel.
func (s *bufferStripe) unmap(addr uintptr, b []byte) {
	if unix.Munmap(b) == nil {
		delete(s.owned, addr)
		buffers.mapped.Add(-int64(len(b)))
	}
}

// homeStripe is the stripe that owns b, by a hash of its address:
// buffers of one size are mapped that size apart, so the plain page
// number would send every 1 MiB buffer to one stripe.
func homeStripe(b []byte) (uintptr, *bufferStripe) {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	h := uint64(addr>>minBufferShift) * 0x9e3779b97f4a7c15 // Fibonacci hashing
	return addr, &buffers.stripes[h>>(64-bits.Len(bufferStripes-1))]
}

// BuffersLocked reports whether every buffer mapped so far is locked in
// memory.
func BuffersLocked() bool { return !buffers.unlocked.Load() }

// BufferBytesMapped returns the bytes of buffer memory mapped now, in use
// or kept free.
func BufferBytesMapped() int64 { return buffers.mapped.Load() }

func bufferClass(n int) int {
	if n <= 1<<minBufferShift {
		return minBufferShift
	}
	c := bits.Len(uint(n - 1))
	if c > maxBufferShift {
		panic("blockdev: buffer larger than 32 MiB")
	}
	return c
}

func mapBuffer(size int) []byte {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic("blockdev: cannot map a buffer: " + err.Error())
	}
	_ = unix.Madvise(b, unix.MADV_DONTDUMP)
	if unix.Mlock(b) != nil {
		buffers.unlocked.Store(true)
	}
	buffers.mapped.Add(int64(size))
	addr, s := homeStripe(b)
	s.mu.Lock()
	if s.owned == nil {
		s.owned = map[uintptr]bool{}
	}
	s.owned[addr] = true
	s.mu.Unlock()
	return b
}
