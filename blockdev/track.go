package blockdev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Tracked is a Device layer that remembers every acknowledged write until
// a flush settles it, so that no acknowledged write can be lost without
// every later Flush failing:
//
//   - A write (WriteAt, Trim, WriteZeroes) that succeeds is pending until
//     the next Flush. If that Flush fails, every pending range becomes
//     failed: the device may have dropped any of them (a page-cache
//     writeback error is reported to one fdatasync only; a volatile cache
//     that fails to flush loses what it held).
//   - A Flush fails while any range is failed, every time, with an error
//     that matches ErrLostWrites, until each failed range is written again
//     successfully (and that write is flushed).
//   - A write that fails is not acknowledged: its caller hears the error,
//     and the range holds whatever the device has, as under dm-crypt. It
//     does not fail later flushes: a file system that gets EIO for a block
//     handles it (ext4 aborts its journal, e2fsck repairs after healing),
//     and a flush that failed over a block nobody rewrites (ext4 does not
//     rewrite lost data blocks) would keep e2fsck's own flush failing.
//
// Refused requests (read-only, out of range, not supported, closed) leave
// no trace. Reads pass through untouched.
//
// Pending ranges are kept exactly, in shards by offset so that concurrent
// writes do not share a lock. A shard that would hold more than
// maxPendingSpans ranges flushes the device itself, which bounds the memory
// of a random-write load that never flushes.
type Tracked struct {
	dev     Device
	flushMu sync.Mutex // one Flush at a time (see Flush)
	// failGen counts failed flushes. A write records itself failed when
	// one happened while it ran: the flush's error may have been its own.
	failGen atomic.Uint64
	shards  [pendingShards]pendingShard

	failedN atomic.Int32 // spans in failed, read without mu on the write path
	mu      sync.Mutex
	failed  spanSet
	cause   error // the first error behind the failed ranges
}

const (
	pendingShards   = 64
	pendingShardLog = 20 // 1 MiB of the device per shard, round robin
	maxPendingSpans = 1024
)

type pendingShard struct {
	mu    sync.Mutex
	spans spanSet
	_     [40]byte // keep shards on separate cache lines
}

// cacheDropper is implemented by a device below Tracked whose reads may be
// served from a cache: after a flush fails, the failed ranges are dropped
// from it so that reads show what the device holds.
type cacheDropper interface {
	dropCache(off, length int64)
}

// Track returns dev behind a Tracked layer. Closing it closes dev.
func Track(dev Device) *Tracked { return &Tracked{dev: dev} }

// Device returns the device below.
func (t *Tracked) Device() Device { return t.dev }

// Size is the size of the device below.
func (t *Tracked) Size() int64 { return t.dev.Size() }

// Caps are the device below's, but that WriteAtFUA is always durable by
// itself: a FUA write below, or a write and a flush that lost writes
// elsewhere do not fail.
func (t *Tracked) Caps() Caps {
	c := CapsOf(t.dev)
	c.FUA = true
	return c
}

// ReadAt reads from the device below.
func (t *Tracked) ReadAt(p []byte, off int64) (int, error) { return t.dev.ReadAt(p, off) }

// WriteAt writes through and records the outcome.
func (t *Tracked) WriteAt(p []byte, off int64) (int, error) {
	var n int
	err := t.write(off, int64(len(p)), func() (err error) {
		n, err = t.dev.WriteAt(p, off)
		if err == nil && n < len(p) {
			err = &OpError{Op: "write", Path: "device", Off: off + int64(n), Len: int64(len(p) - n), Err: errors.New("short write")}
		}
		return err
	})
	return n, err
}

// WriteAtFUA writes p at off and returns once it is durable: as one FUA
// write where the device below has them (blockdev.FUAWriter), else as a
// write and a Flush. A durable write settles its range at once. Lost
// writes elsewhere do not fail it: it answers for itself.
func (t *Tracked) WriteAtFUA(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if fw, ok := t.dev.(FUAWriter); ok {
		n, err := fw.WriteAtFUA(p, off)
		if err == nil {
			t.clearFailed(off, end)
			return n, nil
		}
		if !errors.Is(err, errNoFUA) {
			return n, err
		}
	}
	n, err := t.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	if err := t.Flush(); err != nil && (!errors.Is(err, ErrLostWrites) || t.LostWrites(off, end-off) != nil) {
		return n, err
	}
	return n, nil
}

// Trim discards through the device below (ErrNotSupported when it cannot).
// A discarded range counts as written: its old contents are not wanted.
func (t *Tracked) Trim(off, length int64) error {
	tr, ok := t.dev.(Trimmer)
	if !ok {
		return ErrNotSupported
	}
	return t.write(off, length, func() error { return tr.Trim(off, length) })
}

// WriteZeroes zeroes through the device below, or writes zeroes when it
// has no WriteZeroes.
func (t *Tracked) WriteZeroes(off, length int64) error {
	return t.write(off, length, func() error {
		if z, ok := t.dev.(ZeroWriter); ok {
			return z.WriteZeroes(off, length)
		}
		return writeZeroBuffers(t.dev, off, length)
	})
}

// Flush flushes the device below. When that fails, every pending range
// becomes failed and the error is returned; when it succeeds, Flush still
// fails (ErrLostWrites) while failed ranges remain.
//
// Flushes run one at a time: the kernel reports a writeback error to one
// fdatasync only, so two at once could let one succeed over ranges whose
// loss the other saw.
func (t *Tracked) Flush() error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	// Writes recorded before this point completed before it: the flush
	// below covers them.
	covered := t.takePending()
	if err := t.dev.Flush(); err != nil {
		t.failGen.Add(1)
		// Ranges recorded since may have been written back (and lost)
		// by this flush too.
		lost := append(covered, t.takePending()...)
		t.fail(lost, err)
		if cd, ok := t.dev.(cacheDropper); ok {
			for _, sp := range lost {
				cd.dropCache(sp.start, sp.end-sp.start)
			}
		}
		return err
	}
	return t.LostWrites(0, t.dev.Size())
}

// Close closes the device below.
func (t *Tracked) Close() error { return t.dev.Close() }

// Refresh forgets what the device keeps of what it read (Refresher), if
// it keeps anything.
func (t *Tracked) Refresh() error {
	if r, ok := t.dev.(Refresher); ok {
		return r.Refresh()
	}
	return nil
}

// LostWrites returns nil when no byte of [off, off+length) is failed, else
// an error matching ErrLostWrites that describes every failed range.
func (t *Tracked) LostWrites(off, length int64) error {
	if t.failedN.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failed.overlaps(off, off+length) {
		return nil
	}
	return &LostWritesError{Bytes: t.failed.bytes(), Ranges: t.failed.len(), First: t.failed.s[0].start, Err: t.cause}
}

// TakeLostWrites returns what Flush would report as lost (nil when
// nothing is) and forgets it, for a device being closed: its closer is
// told instead, and the last flushes answer for the writes since.
func (t *Tracked) TakeLostWrites() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed.len() == 0 {
		return nil
	}
	err := &LostWritesError{Bytes: t.failed.bytes(), Ranges: t.failed.len(), First: t.failed.s[0].start, Err: t.cause}
	t.failed.take()
	t.cause = nil
	t.failedN.Store(0)
	return err
}

// write runs one write of [off, off+length) and, when it succeeded,
// records it pending.
func (t *Tracked) write(off, length int64, do func() error) error {
	gen := t.failGen.Load()
	err := do()
	if err != nil {
		return err
	}
	t.clearFailed(off, off+length)
	if t.addPending(off, off+length, gen) {
		t.Flush() // a failure is recorded; the write itself succeeded
	}
	return nil
}

// addPending records a successful write as pending, or as failed when a
// flush failed while it ran. It reports whether a shard is full.
func (t *Tracked) addPending(start, end int64, gen uint64) (full bool) {
	for s := start; s < end; {
		e := min(end, (s>>pendingShardLog+1)<<pendingShardLog)
		sh := &t.shards[(s>>pendingShardLog)%pendingShards]
		sh.mu.Lock()
		if t.failGen.Load() != gen {
			sh.mu.Unlock()
			t.fail([]span{{start, end}}, errors.New("a flush failed while the write ran"))
			return false
		}
		sh.spans.add(s, e)
		full = full || sh.spans.len() > maxPendingSpans
		sh.mu.Unlock()
		s = e
	}
	return full
}

// takePending empties every shard and returns what they held.
func (t *Tracked) takePending() []span {
	var all []span
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		all = append(all, sh.spans.take()...)
		sh.mu.Unlock()
	}
	return all
}

func (t *Tracked) fail(spans []span, cause error) {
	t.mu.Lock()
	t.failed.addAll(spans)
	if t.cause == nil {
		t.cause = cause
	}
	t.failedN.Store(int32(t.failed.len()))
	t.mu.Unlock()
}

func (t *Tracked) clearFailed(start, end int64) {
	if t.failedN.Load() == 0 {
		return
	}
	t.mu.Lock()
	t.failed.remove(start, end)
	if t.failed.len() == 0 {
		t.cause = nil
	}
	t.failedN.Store(int32(t.failed.len()))
	t.mu.Unlock()
}

// LostWritesError is a Flush's error while acknowledged writes that may
// not have reached the device have not been written again.
type LostWritesError struct {
	Bytes  int64 // bytes in failed ranges
	Ranges int   // how many ranges
	First  int64 // offset of the first one
	Err    error // the first error behind them
}

func (e *LostWritesError) Error() string {
	return fmt.Sprintf("%d bytes in %d ranges (the first at offset %d) may not have reached the device and were not written again: %v",
		e.Bytes, e.Ranges, e.First, e.Err)
}

// Is makes errors.Is(err, ErrLostWrites) true.
func (e *LostWritesError) Is(target error) bool { return target == ErrLostWrites }

func (e *LostWritesError) Unwrap() error { return e.Err }

// writeZeroBuffers writes zeroes over [off, off+length) with WriteAt.
func writeZeroBuffers(dev Device, off, length int64) error {
	zero := make([]byte, min(length, 1<<20))
	for length > 0 {
		n := min(length, int64(len(zero)))
		if _, err := dev.WriteAt(zero[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}
