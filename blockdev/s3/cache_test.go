package s3

import (
	"bytes"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// Writes return from memory until the dirty bound, then wait for an
// upload; while the store is down a flush fails rather than hang, and so
// does a write that waits for room longer than the store's timeout. The
// dirty chunks are kept and, once the store is back, uploaded without
// reopening: a new opener reads every acknowledged write.
func TestWriteBackBoundAndStoreOutage(t *testing.T) {
	srv := s3test.Start(t)
	st := NewStore(srv.Client(), srv.Bucket(), "wb")
	st.Timeout = 3 * time.Second
	if err := Create(st, 8*testChunk, testChunk); err != nil {
		t.Fatal(err)
	}
	v, err := OpenVolume(st, Options{CacheBytes: 4 * testChunk, DirtyBytes: 2 * testChunk, WriteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	srv.Kill()
	chunk := func(b byte) []byte { return bytes.Repeat([]byte{b}, testChunk) }
	for i := range 2 {
		if _, err := v.WriteAt(chunk(byte(i+1)), int64(i)*testChunk); err != nil {
			t.Fatalf("a write within the dirty bound, store down: %v", err)
		}
	}
	if err := v.Flush(); err == nil {
		t.Fatal("a flush succeeded with the store down")
	}
	if _, err := v.WriteAt(chunk(3), 2*testChunk); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("a write past the dirty bound, store down: %v, want ErrCacheFull", err)
	}
	if d := v.dirtyChunks(); d != 2 {
		t.Fatalf("%d chunks dirty, want the bound, 2", d)
	}

	srv.Restart()
	if _, err := v.WriteAt(chunk(3), 2*testChunk); err != nil {
		t.Fatalf("a write past the dirty bound, store back: %v", err)
	}
	if err := v.Flush(); err != nil {
		t.Fatalf("a flush with the store back: %v", err)
	}
	got := make([]byte, 3*testChunk)
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Join([][]byte{chunk(1), chunk(2), chunk(3)}, nil)) {
		t.Fatal("the store does not hold the writes acknowledged while it was down")
	}
}

// Reading more chunks than the cache holds keeps its bytes within the
// bound.
func TestCacheBound(t *testing.T) {
	srv := s3test.Start(t)
	v, st := newVolume(t, srv, 16*testChunk)
	data := bytes.Repeat([]byte("0123456789abcdef"), 16*testChunk/16)
	if _, err := v.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	small, err := OpenVolume(st, Options{CacheBytes: 3 * testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	p := make([]byte, 4096)
	for off := int64(0); off < 16*testChunk; off += testChunk / 2 {
		if _, err := small.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+4096]) {
			t.Fatalf("read at %d: %v, or other bytes", off, err)
		}
		if b := small.cachedBytes(); b > 3*testChunk {
			t.Fatalf("%d bytes cached, over the bound of %d", b, 3*testChunk)
		}
	}
}

// Random reads in flight, each loading a whole chunk, keep the chunks
// mapped (cached, being loaded, kept spare) within the cache's bound:
// loads wait for room (cache_room.go).
func TestCacheBoundConcurrentLoads(t *testing.T) {
	srv := s3test.Start(t)
	const chunks = 32
	v, st := newVolume(t, srv, chunks*testChunk)
	data := make([]byte, chunks*testChunk)
	rand.Read(data)
	if _, err := v.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	v.Close()
	const bound = 3 * testChunk
	small, err := OpenVolume(st, Options{CacheBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	trimSpares(0) // the first volume's
	spare.mu.Lock()
	spare.peak = spare.mapped
	spare.mu.Unlock()
	var wg sync.WaitGroup
	for i := range chunks {
		wg.Go(func() {
			off := int64(i)*testChunk + 512
			p := make([]byte, 4096)
			if _, err := small.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+4096]) {
				t.Errorf("read at %d: %v, or other bytes", off, err)
			}
		})
	}
	wg.Wait()
	spare.mu.Lock()
	peak := spare.peak
	spare.mu.Unlock()
	if peak > bound {
		t.Fatalf("%d concurrent loads mapped %d bytes of chunks at once, over the cache's bound of %d", chunks, peak, bound)
	}
}

func (v *Volume) dirtyChunks() int {
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	return v.c.dirty
}

func (v *Volume) cachedBytes() int64 {
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	return v.c.bytes
}
