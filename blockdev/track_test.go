package blockdev_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// flushFails asserts that Flush fails n times in a row with a lost-writes
// error that says EIO.
func flushFails(t *testing.T, d blockdev.Device, n int, when string) {
	t.Helper()
	for i := range n {
		err := d.Flush()
		if !errors.Is(err, blockdev.ErrLostWrites) && !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s: flush %d = %v, want it to fail", when, i+1, err)
		}
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s: flush %d error %v does not carry EIO for the frontends", when, i+1, err)
		}
	}
}

// A write that fails is not acknowledged: its caller gets EIO, and it does
// not fail later flushes (dm-crypt's behaviour: the writer knows). An
// acknowledged write that a failed flush may have lost fails every later
// flush, also after the device heals, until it is written again.
func TestTrackedLostWriteFailsEveryFlushUntilRewritten(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	faulty := devtest.NewFaulty(mem)
	d := blockdev.Track(faulty)

	if _, err := d.WriteAt(pattern(8192, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultWrite, 64<<10, 4096)
	if _, err := d.WriteAt(pattern(16384, 2), 60<<10); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write over the failing range = %v, want EIO", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after a write that failed (and said so): %v", err)
	}
	faulty.Heal()

	// Acknowledged, then the flush that should make it durable fails.
	if _, err := d.WriteAt(pattern(16384, 3), 60<<10); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultFlush, 0, 0)
	flushFails(t, d, 3, "while flushes fail")
	if err := d.LostWrites(60<<10, 1); err == nil {
		t.Fatal("LostWrites sees nothing in the lost range")
	}
	if err := d.LostWrites(0, 8192); err != nil {
		t.Fatalf("LostWrites outside the lost range: %v", err)
	}
	faulty.Heal()
	flushFails(t, d, 3, "healed, not rewritten")
	// Rewriting part of the range is not enough.
	if _, err := d.WriteAt(pattern(8192, 4), 60<<10); err != nil {
		t.Fatal(err)
	}
	flushFails(t, d, 1, "half rewritten")
	if _, err := d.WriteAt(pattern(8192, 5), 68<<10); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after the range was rewritten: %v", err)
	}
	want := append(pattern(8192, 4), pattern(8192, 5)...)
	if got := mem.Bytes()[60<<10 : 76<<10]; !bytes.Equal(got, want) {
		t.Fatal("the rewritten range does not hold the rewrite")
	}
}

// Over a write-back cache that reports a write-back error to one flush
// only (the kernel's page cache), the lost write fails every flush.
func TestTrackedWriteBackErrorReportedEveryTime(t *testing.T) {
	// The cache alone: the second flush succeeds and the write is gone,
	// though reads still show it. This is the failure Tracked is for.
	mem := devtest.NewMem(1 << 20)
	faulty := devtest.NewFaulty(mem)
	wb := devtest.NewWriteBack(faulty)
	if _, err := wb.WriteAt(pattern(4096, 9), 8192); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultWrite, 0, -1)
	if err := wb.Flush(); err == nil {
		t.Fatal("the cache's first flush hid the write-back error")
	}
	if err := wb.Flush(); err != nil {
		t.Fatalf("the model changed: a second flush reports %v", err)
	}
	got := make([]byte, 4096)
	wb.ReadAt(got, 8192)
	if !bytes.Equal(got, pattern(4096, 9)) || bytes.Equal(mem.Bytes()[8192:12288], pattern(4096, 9)) {
		t.Fatal("the model changed: reads should show the lost write until the cache is dropped")
	}

	// With Tracked on top, every flush fails until the range is rewritten.
	mem = devtest.NewMem(1 << 20)
	faulty = devtest.NewFaulty(mem)
	wb = devtest.NewWriteBack(faulty)
	d := blockdev.Track(wb)
	if _, err := d.WriteAt(pattern(4096, 9), 8192); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultWrite, 0, -1)
	flushFails(t, d, 3, "write-back failing")
	faulty.Heal()
	flushFails(t, d, 2, "healed")
	if _, err := d.WriteAt(pattern(4096, 10), 8192); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after the rewrite: %v", err)
	}
	if !bytes.Equal(mem.Bytes()[8192:12288], pattern(4096, 10)) {
		t.Fatal("the rewrite did not reach the device")
	}
}

// A flush that fails makes every write since the last good flush failed.
func TestTrackedFailedFlushFailsPendingWrites(t *testing.T) {
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	d := blockdev.Track(faulty)
	d.WriteAt(pattern(4096, 1), 0)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	d.WriteAt(pattern(4096, 2), 4096)
	d.WriteAt(pattern(512, 3), 768<<10)
	faulty.Fail(devtest.FaultFlush, 0, 0)
	if err := d.Flush(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush = %v", err)
	}
	faulty.Heal()
	flushFails(t, d, 2, "after the failed flush")
	var lw *blockdev.LostWritesError
	if err := d.Flush(); !errors.As(err, &lw) || lw.Bytes != 4096+512 || lw.Ranges != 2 || lw.First != 4096 {
		t.Fatalf("lost writes %+v (%v), want 4608 bytes in 2 ranges from 4096", lw, err)
	}
	if err := d.LostWrites(0, 4096); err != nil {
		t.Fatalf("the range flushed before the failure is reported lost: %v", err)
	}
	d.WriteAt(pattern(4096, 4), 4096)
	flushFails(t, d, 1, "one range rewritten of two")
	d.WriteZeroes(768<<10, 512)
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after both ranges were rewritten: %v", err)
	}
}

// Requests refused before anything was written leave no failed range.
func TestTrackedRefusalsLeaveNoTrace(t *testing.T) {
	d := blockdev.Track(devtest.NewMem(4096))
	if _, err := d.WriteAt(make([]byte, 10), 4090); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end = %v", err)
	}
	if err := d.Trim(0, 512); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("trim on a device without it = %v", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after refused requests: %v", err)
	}
}

// A write that was running while a flush failed may have been lost by that
// flush's write-back: it is failed, though it returned success.
func TestTrackedWriteAcrossFailedFlush(t *testing.T) {
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	writes := devtest.NewHold(faulty) // holds the write, to run it across a flush
	writes.StallIf(func(op devtest.ErringOp, _ int64) bool { return op == devtest.OpWrite })
	d := blockdev.Track(writes)
	done := make(chan error)
	go func() { _, err := d.WriteAt(pattern(4096, 1), 0); done <- err }()
	<-writes.Entered()
	faulty.Fail(devtest.FaultFlush, 0, 0)
	if err := d.Flush(); err == nil {
		t.Fatal("flush did not fail")
	}
	faulty.Heal()
	writes.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	flushFails(t, d, 2, "write ran across a failed flush")
}

// A shard with too many pending ranges flushes by itself, so memory stays
// bounded under random writes that never flush.
func TestTrackedPendingIsBounded(t *testing.T) {
	mem := devtest.NewMem(64 << 20)
	d := blockdev.Track(mem)
	for i := range 3000 {
		if _, err := d.WriteAt(make([]byte, 512), int64(i%1600)*640); err != nil {
			t.Fatal(err)
		}
	}
	if mem.Flushes() == 0 {
		t.Fatal("3000 disjoint pending ranges in one shard never flushed")
	}
}

// Concurrent writes and flushes under the race detector; then a failed
// flush loses exactly what was written since the last good one.
func TestTrackedConcurrent(t *testing.T) {
	const block, blocks = 4096, 256
	faulty := devtest.NewFaulty(devtest.NewMem(block * blocks))
	d := blockdev.Track(faulty)
	faulty.Fail(devtest.FaultWrite, 200*block, 10*block)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 500 {
				if r.IntN(20) == 0 {
					if err := d.Flush(); err != nil {
						t.Error(err)
					}
					continue
				}
				d.WriteAt(make([]byte, block), int64(r.IntN(blocks))*block)
			}
		}()
	}
	wg.Wait()
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	for b := 100; b < 110; b++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.WriteAt(make([]byte, block), int64(b)*block); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	faulty.Fail(devtest.FaultFlush, 0, 0)
	if err := d.Flush(); err == nil {
		t.Fatal("flush did not fail")
	}
	faulty.Heal()
	var lw *blockdev.LostWritesError
	if err := d.Flush(); !errors.As(err, &lw) || lw.Bytes != 10*block || lw.First != 100*block || lw.Ranges != 1 {
		t.Fatalf("flush = %v, want the 10 blocks written since the last good flush lost", err)
	}
	for b := 100; b < 110; b++ {
		if _, err := d.WriteAt(make([]byte, block), int64(b)*block); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(fmt.Errorf("after rewriting: %w", err))
	}
}

// TakeLostWrites reports the lost writes once and forgets them: the next
// flush answers for what came since.
func TestTrackedTakeLostWrites(t *testing.T) {
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	d := blockdev.Track(faulty)
	if d.TakeLostWrites() != nil {
		t.Fatal("lost writes on a fresh device")
	}
	d.WriteAt(pattern(4096, 1), 4096)
	faulty.Fail(devtest.FaultFlush, 0, 0)
	d.Flush()
	faulty.Heal()
	var lw *blockdev.LostWritesError
	if err := d.TakeLostWrites(); !errors.As(err, &lw) || lw.Bytes != 4096 || lw.First != 4096 {
		t.Fatalf("TakeLostWrites = %v", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after the loss was taken: %v", err)
	}
}
