package blockdev

import (
	"testing"
	"unsafe"

	"github.com/luksd/luksd/internal/testtool"
)

// vmLocked returns this process's VmLck in bytes.
func vmLocked(t *testing.T) int64 { return testtool.ProcStatusKiB(t, "VmLck") << 10 }

func TestBuffersAlignedLockedAndReturned(t *testing.T) {
	before, lockedBefore := BufferBytesMapped(), vmLocked(t)
	var bufs [][]byte
	for _, n := range []int{1, 4096, 5000, 64 << 10, 1 << 20, 3 << 20} {
		b := GetBuffer(n)
		if len(b) != n || cap(b) < n || cap(b)&(cap(b)-1) != 0 || cap(b) < 4096 {
			t.Fatalf("GetBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		if uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
			t.Fatalf("GetBuffer(%d) is not page-aligned", n)
		}
		b[0], b[n-1] = 1, 2
		bufs = append(bufs, b)
	}
	mapped := BufferBytesMapped() - before
	if mapped < 4<<20 {
		t.Fatalf("%d bytes mapped for the buffers", mapped)
	}
	if BuffersLocked() {
		if got := vmLocked(t) - lockedBefore; got < mapped {
			t.Fatalf("VmLck grew by %d bytes for %d bytes of buffers", got, mapped)
		}
	} else {
		t.Logf("mlock is not allowed here: the buffers are not locked")
	}
	// Something else handed back is ignored, not unmapped.
	PutBuffer(make([]byte, 4096))
	for _, b := range bufs {
		PutBuffer(b)
	}
	// What exceeds the free lists' budget is unmapped.
	if after := BufferBytesMapped() - before; after > maxFreeBufferBytes {
		t.Fatalf("%d bytes still mapped after all buffers came back", after)
	}
	// A buffer that came back is handed out again.
	b := GetBuffer(64 << 10)
	if BufferBytesMapped() > before+maxFreeBufferBytes {
		t.Fatal("a kept buffer was not reused")
	}
	PutBuffer(b)
}

// After a burst of large requests has filled the free lists, a small
// buffer that comes back is still kept, so a load of small requests maps
// nothing.
func TestSmallBuffersKeptAfterLargeBurst(t *testing.T) {
	var large [][]byte
	for range 4 * maxFreeBufferBytes / (1 << 20) {
		large = append(large, GetBuffer(1<<20))
	}
	for _, b := range large {
		PutBuffer(b)
	}
	for i := range buffers.stripes {
		s := &buffers.stripes[i]
		s.mu.Lock()
		full := s.bytes+4096 > maxFreeBufferBytes/bufferStripes
		s.mu.Unlock()
		if !full {
			t.Fatalf("stripe %d is not full of large buffers: the test proves nothing", i)
		}
	}
	small := GetBuffer(4096)
	PutBuffer(small)
	mapped := BufferBytesMapped()
	for range 100 {
		b := GetBuffer(4096)
		if BufferBytesMapped() != mapped {
			t.Fatalf("a 4 KiB request mapped a buffer: %d bytes mapped, then %d", mapped, BufferBytesMapped())
		}
		PutBuffer(b)
		if BufferBytesMapped() != mapped {
			t.Fatalf("a 4 KiB request's buffer was unmapped: %d bytes mapped, then %d", mapped, BufferBytesMapped())
		}
	}
	if BufferBytesMapped() > maxFreeBufferBytes+1<<20 {
		t.Errorf("%d bytes mapped with nothing in use", BufferBytesMapped())
	}
}

func BenchmarkBuffers64K(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			PutBuffer(GetBuffer(64 << 10))
		}
	})
}
