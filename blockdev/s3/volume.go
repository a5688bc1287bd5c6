package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// Volume is a chunked volume in a store, as a blockdev.Device, behind a
// write-back cache (cache.go, upload.go): a write returns once it is in
// memory, and Flush (or WriteAtFUA) returns once every write before it
// is in the store. It is safe for concurrent use: the writes to one
// chunk take turns on the chunk's cache entry (no write undoes another;
// a partial write of a chunk not cached does not read it: partial.go), writes to
// different chunks and reads run at once.
type Volume struct {
	st      *Store
	m       Manifest
	opts    Options
	c       *cache
	lease   *lease // with Options.Exclusive (but read-only credentials)
	closed  atomic.Bool
	stopped bool // guarded by c.mu: the uploads have stopped
	kick    chan struct{}
	ra      readAhead // readahead.go
	// prefetchStore is st for the read-ahead's loads: Close cancels them.
	prefetchStore *Store
	cancel        context.CancelFunc
	done          chan struct{}
	wg            sync.WaitGroup
	closeErr      error
	closeMu       sync.Mutex
	hooks         testHooks
	// writer is set once a read-only exclusive opener sees a writer's
	// lease (watchLease): its reads fail from then on.
	writer atomic.Bool
}

// testHooks, set only by tests before the first write, stop a writer or
// an upload at the points where their interleaving matters.
type testHooks struct {
	reserved func(idx int64) // a writer has reserved chunk idx, not yet written it
	stored   func(idx int64) // an upload of chunk idx is in the store, its end not yet recorded
	prefetch func(idx int64) // the read-ahead is about to load chunk idx
}

// Options bound a volume's memory and uploads.
type Options struct {
	ReadOnly bool
	// Exclusive takes the volume's lease (lease.go) for as long as it is
	// open: another exclusive opener is refused with blockdev.ErrInUse.
	// With ReadOnly and credentials that may not write the lease, it
	// takes none, but is refused while someone holds it, and stops
	// reading once a writer does.
	Exclusive bool
	// LeaseTTL is how long the lease lasts unless renewed
	// (LeaseTTLFor the store's timeout when 0).
	LeaseTTL time.Duration
	// CacheBytes bounds the chunks kept in memory, dirty ones included
	// (DefaultCacheBytes when 0; at least two chunks).
	CacheBytes int64
	// DirtyBytes bounds the chunks written and not yet uploaded; a write
	// that would pass it waits for an upload (DefaultDirtyBytes when 0; at
	// least one chunk, at most CacheBytes).
	DirtyBytes int64
	// Uploads is how many chunk uploads run at once (DefaultUploads).
	Uploads int
	// WriteDelay is how long a dirty chunk waits for more writes before
	// its upload starts (a flush starts it at once).
	WriteDelay time.Duration
}

// The defaults of Options.
const (
	DefaultCacheBytes = 256 << 20
	DefaultDirtyBytes = 64 << 20
	DefaultUploads    = 8
	DefaultWriteDelay = 100 * time.Millisecond
)

var (
	_ blockdev.Device    = (*Volume)(nil)
	_ blockdev.Trimmer   = (*Volume)(nil)
	_ blockdev.FUAWriter = (*Volume)(nil)
	_ blockdev.Refresher = (*Volume)(nil)
)

// OpenVolume opens the volume at st (ErrNoVolume when there is none).
func OpenVolume(st *Store, opts Options) (*Volume, error) {
	m, err := ReadManifest(st)
	if err != nil {
		return nil, err
	}
	opts.fill(m.ChunkSize, st.Timeout)
	v := &Volume{st: st, m: m, opts: opts, kick: make(chan struct{}, 1), done: make(chan struct{})}
	watch := false
	if opts.Exclusive {
		v.lease, err = acquireLease(st, opts.LeaseTTL)
		if err != nil && opts.ReadOnly && errors.Is(err, os.ErrPermission) {
			// Read-only credentials cannot write the lease: the reader
			// makes sure nobody writes now and watches while open.
			v.lease, watch, err = nil, true, checkNoWriter(st)
		}
		if err != nil {
			return nil, err
		}
	}
	var ctx context.Context
	ctx, v.cancel = context.WithCancel(context.Background())
	v.prefetchStore = st.within(ctx)
	if watch {
		v.wg.Go(func() {
			watchLease(v.prefetchStore, opts.LeaseTTL/leaseRenewals, v.done, func() { v.writer.Store(true) })
		})
	}
	v.c = newCache(m.ChunkSize, opts.CacheBytes, int(opts.DirtyBytes/m.ChunkSize), v.chunkLen)
	v.wg.Add(1)
	go v.scheduleUploads()
	return v, nil
}

// fill sets the defaults and the bounds of o for chunks of chunkSize in
// a store whose operations time out after timeout.
func (o *Options) fill(chunkSize int64, timeout time.Duration) {
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	o.CacheBytes = max(o.CacheBytes, 2*chunkSize)
	if o.DirtyBytes == 0 {
		o.DirtyBytes = DefaultDirtyBytes
	}
	o.DirtyBytes = min(max(o.DirtyBytes, chunkSize), o.CacheBytes)
	if o.Uploads <= 0 {
		o.Uploads = DefaultUploads
	}
	if o.WriteDelay == 0 {
		o.WriteDelay = DefaultWriteDelay
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = LeaseTTLFor(timeout)
	}
}

// Manifest returns the volume's layout.
func (v *Volume) Manifest() Manifest { return v.m }

// Size is the volume's size, as its manifest records it.
func (v *Volume) Size() int64 { return v.m.Size }

// Caps: a volume takes discards (whole chunks are deleted).
func (v *Volume) Caps() blockdev.Caps {
	return blockdev.Caps{ReadOnly: v.opts.ReadOnly, Trim: !v.opts.ReadOnly, FUA: !v.opts.ReadOnly}
}

// ReadAt reads as a file does, io.EOF past the end. Chunks not stored
// read as zeros.
func (v *Volume) ReadAt(p []byte, off int64) (int, error) {
	if v.closed.Load() {
		return 0, os.ErrClosed
	}
	if off < 0 {
		return 0, v.opError("read", off, len(p), blockdev.ErrOutOfRange)
	}
	if v.writer.Load() {
		return 0, v.opError("read", off, len(p), ErrWriterArrived)
	}
	if off >= v.m.Size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > v.m.Size-off {
		p, eof = p[:v.m.Size-off], io.EOF
	}
	stream := false
	if cs := v.m.ChunkSize; len(p) > 0 {
		stream = v.followStream(off/cs, (off+int64(len(p))-1)/cs)
	}
	err := v.eachChunk(p, off, func(idx, at int64, part []byte) error {
		return v.readChunk(idx, at, part, stream)
	})
	if err != nil {
		return 0, v.opError("read", off, len(p), err)
	}
	return len(p), eof
}

// WriteAt writes p at off; writes reaching past Size fail with
// blockdev.ErrOutOfRange.
func (v *Volume) WriteAt(p []byte, off int64) (int, error) {
	if err := v.checkWrite(off, int64(len(p))); err != nil {
		return 0, v.opError("write", off, len(p), err)
	}
	err := v.eachChunk(p, off, v.writeChunk)
	if err != nil {
		return 0, v.opError("write", off, len(p), err)
	}
	return len(p), nil
}

// WriteAtFUA writes p at off and returns once it is in the store.
func (v *Volume) WriteAtFUA(p []byte, off int64) (int, error) {
	n, err := v.WriteAt(p, off)
	if err != nil || n == 0 {
		return n, err
	}
	cs := v.m.ChunkSize
	if err := v.waitUploaded(v.pending(off/cs, (off+int64(n)-1)/cs, false)); err != nil {
		return 0, v.opError("write", off, len(p), err)
	}
	return n, nil
}

// Trim deletes the chunks that lie wholly inside [off, off+length); the
// parts of chunks it only overlaps keep their bytes (a discard is a hint).
// A deleted chunk reads as zeros.
func (v *Volume) Trim(off, length int64) error {
	if err := v.checkWrite(off, length); err != nil {
		return v.opError("trim", off, int(length), err)
	}
	cs := v.m.ChunkSize
	for idx := (off + cs - 1) / cs; idx*cs < v.m.Size && idx*cs+v.chunkLen(idx) <= off+length; idx++ {
		e := v.c.get(idx)
		e.mu.Lock()
		if err := v.c.reserve(e, v.kickUploads, v.st.Timeout); err != nil {
			e.mu.Unlock()
			v.c.release(e)
			return v.opError("trim", off, int(length), err)
		}
		v.c.setData(e, nil, true)
		v.c.wrote(e)
		e.mu.Unlock()
		v.c.release(e)
	}
	v.kickUploads()
	return nil
}

// Flush returns once every write that completed before it is in the
// store, or with the error of an upload that failed meanwhile.
func (v *Volume) Flush() error {
	if v.closed.Load() {
		return os.ErrClosed
	}
	if err := v.waitUploaded(v.pending(0, 0, true)); err != nil {
		return &blockdev.OpError{Op: "flush", Path: v.st.String(), Err: err}
	}
	return nil
}

// Refresh forgets the chunks the cache read (blockdev.Refresher), so that
// the next reads fetch what the store holds now: another process on
// this host (the header verbs, under their metadata lock) may have
// rewritten them since. Chunks written and not yet uploaded stay, and a
// chunk a request holds or loads at the moment stays too: the header
// verbs call it with no request of their own running.
func (v *Volume) Refresh() error {
	if v.closed.Load() {
		return os.ErrClosed
	}
	v.c.forget()
	return nil
}

// Close flushes, stops the uploads and makes every later call fail with
// os.ErrClosed. It returns the flush's error: writes it could not upload
// are lost.
func (v *Volume) Close() error {
	v.closeMu.Lock()
	defer v.closeMu.Unlock()
	if v.closed.Load() {
		return v.closeErr
	}
	if !v.opts.ReadOnly {
		v.closeErr = v.Flush()
	}
	v.closed.Store(true)
	v.c.mu.Lock()
	v.stopped = true
	v.c.changed.Broadcast()
	v.c.mu.Unlock()
	close(v.done)
	v.cancel()
	v.stopReadAhead()
	v.wg.Wait()
	v.c.drop()
	if v.lease != nil {
		// Released only once every upload has ended.
		v.closeErr = errors.Join(v.closeErr, v.lease.release())
	}
	return v.closeErr
}

func (v *Volume) checkWrite(off, length int64) error {
	switch {
	case v.closed.Load():
		return os.ErrClosed
	case v.opts.ReadOnly:
		return blockdev.ErrReadOnly
	case off < 0 || length < 0 || off > v.m.Size || length > v.m.Size-off:
		return blockdev.ErrOutOfRange
	}
	return v.checkLease()
}

// checkLease fails once an exclusive volume's lease is lost.
func (v *Volume) checkLease() error {
	if v.lease == nil {
		return nil
	}
	return v.lease.check()
}

// eachChunk calls fn for each chunk p (at off in the volume) touches,
// with the chunk's index, the offset in the chunk and the part of p in
// it; the chunks of a request run at once.
func (v *Volume) eachChunk(p []byte, off int64, fn func(idx, at int64, part []byte) error) error {
	cs, n := v.m.ChunkSize, len(p)
	if n == 0 {
		return nil
	}
	first, last := off/cs, (off+int64(n)-1)/cs
	if first == last {
		return fn(first, off-first*cs, p)
	}
	errs := make([]error, last-first+1)
	var wg sync.WaitGroup
	for idx := first; idx <= last; idx++ {
		start := max(idx*cs, off)
		end := min((idx+1)*cs, off+int64(n))
		wg.Go(func() {
			errs[idx-first] = fn(idx, start-idx*cs, p[start-off:end-off])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// chunkLen is the length of chunk idx: the chunk size but for a last
// chunk cut short by the volume's end.
func (v *Volume) chunkLen(idx int64) int64 {
	return min(v.m.ChunkSize, v.m.Size-idx*v.m.ChunkSize)
}

// readChunk reads part at offset at of chunk idx, for a sequential
// stream or not (readahead.go).
func (v *Volume) readChunk(idx, at int64, part []byte, stream bool) error {
	e := v.c.get(idx)
	e.mu.Lock()
	var err error
	if !e.loaded && e.data != nil && e.have.covers(at, at+int64(len(part))) {
		// All written since the chunk was cached: no need to load it.
	} else {
		err = v.load(e)
	}
	switch {
	case err != nil:
	case e.zero:
		clear(part)
	default:
		copy(part, e.data[at:])
	}
	e.mu.Unlock()
	v.c.releaseRead(e, stream, at, at+int64(len(part)), v.chunkLen(idx))
	return err
}

// writeChunk writes part at offset at of chunk idx into the cache,
// without reading the store (partial.go).
func (v *Volume) writeChunk(idx, at int64, part []byte) error {
	e := v.c.get(idx)
	defer v.c.release(e)
	// e.mu is held from the reservation to the write (see uploaded).
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := v.c.reserve(e, v.kickUploads, v.st.Timeout); err != nil {
		return err
	}
	if v.hooks.reserved != nil {
		v.hooks.reserved(idx)
	}
	v.writePart(e, v.chunkLen(idx), at, part)
	v.kickUploads()
	return nil
}

// load reads chunk e from the store unless it is cached; a chunk not
// stored is all zeros. e.mu is held.
func (v *Volume) load(e *entry) error { return v.loadFrom(v.st, e) }

// loadFrom is load with the requests to st. A chunk partly written
// (partial.go) is merged.
func (v *Volume) loadFrom(st *Store, e *entry) error {
	switch {
	case e.loaded:
		return nil
	case e.data != nil:
		return v.merge(st, e)
	}
	n := v.chunkLen(e.idx)
	if err := v.c.admit(n, v.st.Timeout); err != nil {
		return err
	}
	return v.loadAdmitted(st, e, n)
}

// loadAdmitted loads chunk e, for which n bytes were admitted. e.mu is
// held.
func (v *Volume) loadAdmitted(st *Store, e *entry, n int64) error {
	defer v.c.admitted(n)
	data := allocChunkUncleared(n) // readInto fills it all
	err := st.readInto(chunkName(e.idx), data)
	if err != nil {
		freeChunk(data)
	}
	switch {
	case errors.Is(err, errNotFound):
		v.c.setData(e, nil, true)
		return nil
	case err != nil:
		return err
	}
	v.c.setData(e, data, false)
	return nil
}

func (v *Volume) opError(op string, off int64, n int, err error) error {
	return &blockdev.OpError{Op: op, Path: v.st.String(), Off: off, Len: int64(n), Err: err}
}

// chunkPrefix starts the name of every chunk object.
const chunkPrefix = "chunk-"

// chunkName is the object name of chunk idx: fixed-width hex, so that a
// listing comes in volume order.
func chunkName(idx int64) string { return fmt.Sprintf("%s%016x", chunkPrefix, idx) }
