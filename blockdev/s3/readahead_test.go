package s3

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

func TestReadAheadStream(t *testing.T) {
	srv := s3test.Start(t)
	t.Run("Parallel", func(t *testing.T) { testReadAheadParallel(t, srv) })
	t.Run("StopsWithTheStream", func(t *testing.T) { testReadAheadStops(t, srv) })
	t.Run("EndOfVolume", func(t *testing.T) { testReadAheadEnd(t, srv) })
	t.Run("NeverStale", func(t *testing.T) { testReadAheadNeverStale(t, srv) })
	t.Run("DropBehind", func(t *testing.T) { testReadAheadDropBehind(t, srv) })
	t.Run("DropBehindOutOfOrder", func(t *testing.T) { testReadAheadDropBehindOutOfOrder(t, srv) })
	t.Run("CacheBound", func(t *testing.T) { testReadAheadCacheBound(t, srv) })
}

// storedVolume creates a volume of size bytes holding a pattern, in the
// store, and returns the pattern and the store.
func storedVolume(t *testing.T, srv *s3test.Server, size int64) ([]byte, *Store) {
	t.Helper()
	v, st := newVolume(t, srv, size)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	if _, err := v.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return data, st
}

// loadGate holds the read-ahead's loads in its hook, before their GETs,
// and records which chunks it loaded.
type loadGate struct {
	mu      sync.Mutex
	changed *sync.Cond
	open    bool
	waiting int
	loaded  []int64
}

// newLoadGate sets the gate in v's hook; it opens when t ends, before v
// closes, if the test has not opened it.
func newLoadGate(t *testing.T, v *Volume, open bool) *loadGate {
	g := &loadGate{open: open}
	g.changed = sync.NewCond(&g.mu)
	v.hooks.prefetch = g.hook
	t.Cleanup(g.release)
	return g
}

func (g *loadGate) hook(idx int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loaded = append(g.loaded, idx)
	g.waiting++
	g.changed.Broadcast()
	for !g.open {
		g.changed.Wait()
	}
	g.waiting--
}

// waitFor waits until n loads are held at once; false after 20 s.
func (g *loadGate) waitFor(n int) bool {
	return g.waitUntil(func() bool { return g.waiting >= n })
}

// waitForChunk waits until the load of chunk idx is held; false after
// 20 s.
func (g *loadGate) waitForChunk(idx int64) bool {
	return g.waitUntil(func() bool { return !g.open && slices.Contains(g.loaded, idx) })
}

// waitUntil waits until done, called with g.mu held, is true; false
// after 20 s.
func (g *loadGate) waitUntil(done func() bool) bool {
	deadline := time.AfterFunc(20*time.Second, func() {
		g.mu.Lock()
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer deadline.Stop()
	start := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for !done() {
		if time.Since(start) > 20*time.Second {
			return false
		}
		g.changed.Wait()
	}
	return true
}

func (g *loadGate) release() {
	g.mu.Lock()
	g.open = true
	g.changed.Broadcast()
	g.mu.Unlock()
}

func (g *loadGate) chunks() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int64(nil), g.loaded...)
}

// readChunkStart reads 4 KiB at the start of chunk idx of v and checks
// it against data.
func readChunkStart(t *testing.T, v *Volume, data []byte, idx int64) {
	t.Helper()
	p := make([]byte, 4096)
	if _, err := v.ReadAt(p, idx*testChunk); err != nil || !bytes.Equal(p, data[idx*testChunk:][:4096]) {
		t.Fatalf("read of chunk %d: %v, or other bytes", idx, err)
	}
}

// A reader going from one chunk into the next has Uploads loads of the
// chunks ahead of it under way at once, and only in the window ahead.
func testReadAheadParallel(t *testing.T, srv *s3test.Server) {
	v, data, g := streamHeld(t, srv)
	g.release()
	n := v.readAheadChunks()
	waitLoaded(t, v, 2, 1+n)
	for _, idx := range g.chunks() {
		if idx < 2 || idx > 1+n {
			t.Errorf("chunk %d loaded ahead, outside the window 2..%d", idx, 1+n)
		}
	}
	for idx := int64(2); idx <= 1+n; idx++ {
		readChunkStart(t, v, data, idx)
	}
}

// streamHeld opens a volume of 40 chunks, reads chunks 0 and 1, and
// returns once Uploads loads ahead are held at its gate.
func streamHeld(t *testing.T, srv *s3test.Server) (*Volume, []byte, *loadGate) {
	t.Helper()
	data, st := storedVolume(t, srv, 40*testChunk)
	v := reopen(t, st)
	g := newLoadGate(t, v, false)
	readChunkStart(t, v, data, 0)
	readChunkStart(t, v, data, 1)
	if !g.waitFor(v.opts.Uploads) {
		t.Fatalf("%d read-ahead loads at once after reads of chunks 0 and 1, want %d", len(g.chunks()), v.opts.Uploads)
	}
	return v, data, g
}

// waitLoaded waits until chunks first to last are in the cache.
func waitLoaded(t *testing.T, v *Volume, first, last int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for idx := first; idx <= last; idx++ {
		for !v.loaded(idx) {
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d was not read ahead", idx)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A read elsewhere ends the stream: the chunks of its window not yet
// loading are never loaded.
func testReadAheadStops(t *testing.T, srv *s3test.Server) {
	v, data, g := streamHeld(t, srv)
	readChunkStart(t, v, data, 38) // the reader went elsewhere
	g.release()
	for deadline := time.Now().Add(20 * time.Second); v.readAheadRunning() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read-ahead loads did not end after the stream moved")
		}
	}
	got := g.chunks()
	if len(got) != v.opts.Uploads {
		t.Fatalf("chunks %v loaded ahead; want only the %d under way when the stream ended", got, v.opts.Uploads)
	}
}

// The window ends at the volume's end, on a short last chunk too.
func testReadAheadEnd(t *testing.T, srv *s3test.Server) {
	const size = 6*testChunk + 3*512
	data, st := storedVolume(t, srv, size)
	v := reopen(t, st)
	g := newLoadGate(t, v, true)
	readChunkStart(t, v, data, 3)
	readChunkStart(t, v, data, 4)
	waitLoaded(t, v, 5, 6)
	p := make([]byte, 2*512)
	if _, err := v.ReadAt(p, size-int64(len(p))); err != nil || !bytes.Equal(p, data[size-int64(len(p)):]) {
		t.Fatalf("read of the end: %v, or other bytes", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	for _, idx := range g.chunks() {
		if idx != 5 && idx != 6 {
			t.Errorf("chunk %d loaded ahead; the volume ends in chunk 6", idx)
		}
	}
}

// A chunk written while its load ahead waits, or before the load starts,
// reads back as written, never as the store held it.
func testReadAheadNeverStale(t *testing.T, srv *s3test.Server) {
	data, st := storedVolume(t, srv, 40*testChunk)
	v, err := OpenVolume(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	g := newLoadGate(t, v, false)
	before := bytes.Repeat([]byte("written before the read-ahead "), 100)
	if _, err := v.WriteAt(before, 9*testChunk+100); err != nil {
		t.Fatal(err)
	}
	readChunkStart(t, v, data, 0)
	readChunkStart(t, v, data, 1)
	if !g.waitForChunk(2) {
		t.Fatal("no read-ahead of chunk 2 after reads of chunks 0 and 1")
	}
	during := bytes.Repeat([]byte("written while its load waits "), 100)
	wrote := make(chan error, 1)
	go func() {
		_, err := v.WriteAt(during, 2*testChunk+300)
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write to a chunk whose load is under way ended before the load: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	g.release()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, v, 2, 1+v.readAheadChunks())
	for _, w := range []struct {
		off int64
		p   []byte
	}{{9*testChunk + 100, before}, {2*testChunk + 300, during}} {
		got := make([]byte, len(w.p))
		if _, err := v.ReadAt(got, w.off); err != nil || !bytes.Equal(got, w.p) {
			t.Fatalf("read at %d after the read-ahead: %v, or not what was written", w.off, err)
		}
	}
	for _, idx := range []int64{3, 10} {
		readChunkStart(t, v, data, idx)
	}
}

// A long sequential read keeps only the last few chunks it passed, and
// what others read before stays cached.
func testReadAheadDropBehind(t *testing.T, srv *s3test.Server) {
	data, st := storedVolume(t, srv, 60*testChunk)
	v := reopen(t, st)
	readChunkStart(t, v, data, 59) // a reader elsewhere
	p := make([]byte, testChunk/2)
	for off := int64(0); off < 40*testChunk; off += int64(len(p)) {
		if _, err := v.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:][:len(p)]) {
			t.Fatalf("read at %d: %v, or other bytes", off, err)
		}
	}
	if !v.loaded(59) {
		t.Error("a chunk read before a long sequential read was pushed out by it")
	}
	passed := 0
	for idx := int64(1); idx < 39; idx++ { // 0 started the stream: not passed
		if v.cachedIdx(idx) {
			passed++
		}
	}
	if passed > passedChunks {
		t.Errorf("%d chunks the sequential read passed are cached, want at most %d", passed, passedChunks)
	}
}

// A stream's concurrent reads of a chunk complete in any order: the one
// that reaches the chunk's end first does not make it passed, so those
// of its start that come after the stream has gone through more chunks
// than it keeps still find it cached, rather than each loading it again.
func testReadAheadDropBehindOutOfOrder(t *testing.T, srv *s3test.Server) {
	data, st := storedVolume(t, srv, 20*testChunk)
	v := reopen(t, st)
	const q = testChunk / 4
	read := func(off int64) {
		t.Helper()
		p := make([]byte, q)
		if _, err := v.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:][:q]) {
			t.Fatalf("read at %d: %v, or other bytes", off, err)
		}
	}
	for off := int64(0); off < 2*testChunk; off += q {
		read(off) // the stream starts
	}
	read(3*testChunk - q) // chunk 2's end, before its start
	for off := int64(3 * testChunk); off < (4+passedChunks)*testChunk; off += q {
		read(off)
	}
	if !v.loaded(2) {
		t.Fatalf("chunk 2 was dropped before the stream read its start, as passed (%d chunks passed after it)",
			passedChunks+1)
	}
	for off := int64(2 * testChunk); off < 3*testChunk-q; off += q {
		read(off)
	}
}

// readAheadRunning is how many read-ahead loads run.
func (v *Volume) readAheadRunning() int {
	v.ra.mu.Lock()
	defer v.ra.mu.Unlock()
	return v.ra.running
}

// cachedIdx reports whether chunk idx has an entry in the cache.
func (v *Volume) cachedIdx(idx int64) bool { return v.c.has(idx) }

// A sequential read through a small cache keeps it within its bound.
func testReadAheadCacheBound(t *testing.T, srv *s3test.Server) {
	data, st := storedVolume(t, srv, 40*testChunk)
	const cache = 8 * testChunk
	v, err := OpenVolume(st, Options{ReadOnly: true, CacheBytes: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.readAheadChunks() == 0 {
		t.Fatal("no read-ahead with a cache of 8 chunks")
	}
	p := make([]byte, testChunk/4)
	for off := int64(0); off < 40*testChunk; off += int64(len(p)) {
		if _, err := v.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:][:len(p)]) {
			t.Fatalf("read at %d: %v, or other bytes", off, err)
		}
		if b := v.cachedBytes(); b > cache {
			t.Fatalf("%d bytes cached, over the bound of %d", b, cache)
		}
	}
}
