package blockdev

import (
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// TestBuffersShrinkWhenIdle: a 32 MiB burst (fio's 1 MiB requests at
// iodepth 32) maps, locks and makes resident its buffers; once the load
// stops they are unmapped within two trim intervals, and VmRSS and VmLck
// fall back. A steady load meanwhile keeps its buffer.
func TestBuffersShrinkWhenIdle(t *testing.T) {
	old := trimInterval.Load()
	trimInterval.Store(int64(50 * time.Millisecond))
	t.Cleanup(func() { trimInterval.Store(old) })
	waitIdle := func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); freeBytes() > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d bytes still kept free after 5 s idle", freeBytes())
			}
		}
	}
	waitIdle()
	rss, lck := testtool.ProcStatusKiB(t, "VmRSS"), testtool.ProcStatusKiB(t, "VmLck")
	mapped := BufferBytesMapped()

	var burst [][]byte
	for range 32 {
		b := GetBuffer(1 << 20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // resident, as a request's payload makes it
		}
		burst = append(burst, b)
	}
	peak := testtool.ProcStatusKiB(t, "VmRSS")
	for _, b := range burst {
		PutBuffer(b)
	}
	if got := BufferBytesMapped() - mapped; got < 32<<20 {
		t.Fatalf("only %d bytes mapped for the burst", got)
	}
	waitIdle()
	if got := BufferBytesMapped(); got > mapped {
		t.Errorf("%d bytes of buffers mapped when idle, %d before the burst", got, mapped)
	}
	after, afterLck := testtool.ProcStatusKiB(t, "VmRSS"), testtool.ProcStatusKiB(t, "VmLck")
	t.Logf("VmRSS %d KiB before, %d KiB under the burst, %d KiB idle after; VmLck %d -> %d KiB", rss, peak, after, lck, afterLck)
	if peak-rss < 30<<10 {
		t.Fatalf("the burst made only %d KiB resident: the test proves nothing", peak-rss)
	}
	if after > rss+4<<10 {
		t.Errorf("VmRSS %d KiB idle after the burst, %d KiB before", after, rss)
	}
	if BuffersLocked() && afterLck > lck {
		t.Errorf("VmLck %d KiB idle after the burst, %d KiB before", afterLck, lck)
	}

	// A buffer reused all along is kept: no mapping per request.
	PutBuffer(GetBuffer(64 << 10))
	steady := BufferBytesMapped()
	for end := time.Now().Add(10 * time.Duration(trimInterval.Load())); time.Now().Before(end); {
		PutBuffer(GetBuffer(64 << 10))
		if BufferBytesMapped() != steady {
			t.Fatalf("a steady load remapped its buffer: %d bytes mapped, then %d", steady, BufferBytesMapped())
		}
		time.Sleep(time.Millisecond)
	}
}
