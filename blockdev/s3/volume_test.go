package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/blockdev/s3/s3test"
)

const testChunk = MinChunkSize

// newVolume creates a volume of size bytes in chunks of testChunk in a new
// bucket of srv and opens it.
func newVolume(t *testing.T, srv *s3test.Server, size int64) (*Volume, *Store) {
	t.Helper()
	st := NewStore(srv.Client(), srv.Bucket(), "vols/one")
	if err := Create(st, size, testChunk); err != nil {
		t.Fatal(err)
	}
	v, err := OpenVolume(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, st
}

// chunkObjects lists the chunk objects the store holds.
func chunkObjects(t *testing.T, srv *s3test.Server, st *Store) []string {
	t.Helper()
	out, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(st.bucket), Prefix: aws.String(st.prefix + chunkPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range out.Contents {
		names = append(names, aws.ToString(o.Key)[len(st.prefix):])
	}
	return names
}

func TestVolume(t *testing.T) {
	srv := s3test.Start(t)
	t.Run("Manifest", func(t *testing.T) { testManifest(t, srv) })
	t.Run("ReadWrite", func(t *testing.T) { testReadWrite(t, srv) })
	t.Run("ConcurrentPartialWrites", func(t *testing.T) { testConcurrentPartialWrites(t, srv) })
	t.Run("WriteAsUploadEnds", func(t *testing.T) { testWriteAsUploadEnds(t, srv) })
	t.Run("SparseAndTrim", func(t *testing.T) { testSparseAndTrim(t, srv) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, srv) })
	t.Run("ReadAhead", func(t *testing.T) { testReadAhead(t, srv) })
	// partial_test.go
	t.Run("PartialSequentialNoReads", func(t *testing.T) { testSequentialNoReads(t, srv) })
	t.Run("PartialMerge", func(t *testing.T) { testPartialMerge(t, srv) })
	t.Run("ReservedNotDue", func(t *testing.T) { testReservedNotDue(t, srv) })
	t.Run("PartialFillingNotHurried", func(t *testing.T) { testFillingNotHurried(t, srv) })
	t.Run("PartialRoomFromPartial", func(t *testing.T) { testRoomFromPartial(t, srv) })
}

// A volume's layout is in its manifest; a prefix with a volume, or with
// the chunks of one, is not made a volume again.
func testManifest(t *testing.T, srv *s3test.Server) {
	bucket := srv.Bucket()
	st := NewStore(srv.Client(), bucket, "/a/b/")
	if _, err := OpenVolume(st, Options{}); !errors.Is(err, ErrNoVolume) {
		t.Fatalf("open of an empty prefix: %v, want ErrNoVolume", err)
	}
	for _, cs := range []int64{1000, MinChunkSize / 2, MaxChunkSize * 2} {
		if err := Create(st, 1<<20, cs); !errors.Is(err, ErrLayout) {
			t.Errorf("chunk size %d: %v, want ErrLayout", cs, err)
		}
	}
	if err := Create(st, 1000, 0); !errors.Is(err, ErrLayout) {
		t.Errorf("size 1000: %v, want ErrLayout", err)
	}
	if err := Create(st, 10<<20, 0); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(st)
	if err != nil || m != (Manifest{Format: manifestFormat, Version: 1, Size: 10 << 20, ChunkSize: DefaultChunkSize}) {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	if got := st.String(); got != "s3://"+bucket+"/a/b" {
		t.Errorf("store named %q", got)
	}
	if err := Create(st, 1<<20, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}

	// Chunks left by a volume whose manifest is gone would show through.
	v, err := OpenVolume(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteAt([]byte("old data"), 5<<20); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.delete(manifestName); err != nil {
		t.Fatal(err)
	}
	if err := Create(st, 1<<20, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("Create over stale chunks: %v, want ErrExists", err)
	}

	if err := st.put(manifestName, []byte(`{"format":"luksd-s3-volume","version":2,"size":1048576,"chunk_size":4194304}`), false); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVolume(st, Options{}); !errors.Is(err, ErrLayout) {
		t.Fatalf("open of a layout version 2: %v, want ErrLayout", err)
	}
}

// Random reads and writes, across chunk boundaries and up to the short
// last chunk, read back what an in-memory device holds after the same
// writes; so does the volume opened again.
func testReadWrite(t *testing.T, srv *s3test.Server) {
	const size = 6*testChunk + 3*512
	v, st := newVolume(t, srv, size)
	model := devtest.NewMem(size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		n := 1 + rng.IntN(3*testChunk)
		off := rng.Int64N(size - int64(n) + 1)
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		if i%7 == 0 {
			clear(p) // a write of zeros over data
		}
		if _, err := v.WriteAt(p, off); err != nil {
			t.Fatalf("write %d bytes at %d: %v", n, off, err)
		}
		model.WriteAt(p, off)
	}
	want := make([]byte, size)
	model.ReadAt(want, 0)
	if err := v.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []*Volume{v, reopen(t, st)} {
		got := make([]byte, size)
		if n, err := dev.ReadAt(got, 0); n != size || err != nil {
			t.Fatalf("read all: %d, %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the volume does not hold what was written")
		}
		for range 20 {
			n := 1 + rng.IntN(2*testChunk)
			off := rng.Int64N(size - int64(n) + 1)
			p := make([]byte, n)
			if _, err := dev.ReadAt(p, off); err != nil || !bytes.Equal(p, want[off:off+int64(n)]) {
				t.Fatalf("read %d at %d: %v, or other bytes", n, off, err)
			}
		}
	}
	// Past the end, as a file.
	p := make([]byte, 1024)
	if n, err := v.ReadAt(p, size-512); n != 512 || err != io.EOF || !bytes.Equal(p[:512], want[size-512:]) {
		t.Errorf("read across the end: %d, %v", n, err)
	}
	if n, err := v.ReadAt(p, size); n != 0 || err != io.EOF {
		t.Errorf("read at the end: %d, %v", n, err)
	}
}

func reopen(t *testing.T, st *Store) *Volume {
	v, err := OpenVolume(st, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Partial writes to one chunk at once each read, change and write back
// the whole chunk: none may undo another.
func testConcurrentPartialWrites(t *testing.T, srv *s3test.Server) {
	v, st := newVolume(t, srv, 2*testChunk)
	const piece = 4096
	var wg sync.WaitGroup
	for i := range testChunk / piece {
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte(i + 1)}, piece)
			// Half of them straddle into the second chunk.
			off := int64(i*piece) + int64(i%2)*testChunk
			if _, err := v.WriteAt(p, off); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := v.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*testChunk)
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for i := range testChunk / piece {
		off := i*piece + i%2*testChunk
		if !bytes.Equal(got[off:off+piece], bytes.Repeat([]byte{byte(i + 1)}, piece)) {
			t.Errorf("the write of piece %d at %d was lost", i, off)
		}
	}
}

// A write to a chunk whose upload ends between the write's reservation
// and its change of the data (the hooks hold each at that point) is not
// lost: the chunk stays dirty and the next flush uploads it. Before the
// writer held the chunk's lock across both, the ending upload marked the
// chunk clean and the flush had nothing to wait for.
func testWriteAsUploadEnds(t *testing.T, srv *s3test.Server) {
	st := NewStore(srv.Client(), srv.Bucket(), "race")
	if err := Create(st, 2*testChunk, testChunk); err != nil {
		t.Fatal(err)
	}
	v, err := OpenVolume(st, Options{WriteDelay: time.Hour}) // uploads only on a flush
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// The hooks are set before the first write (an upload may read them
	// from then on) and act once armed, after it.
	stored, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var armed, disarmed atomic.Bool
	v.hooks.stored = func(int64) {
		if armed.Load() {
			once.Do(func() { close(stored); <-release })
		}
	}
	v.hooks.reserved = func(int64) {
		if !armed.Load() || disarmed.Load() {
			return
		}
		// Let the upload record its end, and give it time to: with the
		// writer holding the chunk's lock it cannot, and the wait runs out.
		close(release)
		for deadline := time.Now().Add(2 * time.Second); v.dirtyChunks() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	first := bytes.Repeat([]byte{1}, testChunk)
	if _, err := v.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	flushed := make(chan error, 1)
	go func() { flushed <- v.Flush() }()
	<-stored // the first write is in the store; its upload has not said so
	second := []byte("written as the upload ended")
	if _, err := v.WriteAt(second, 100); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	disarmed.Store(true)
	if err := v.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, testChunk)
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	copy(first[100:], second)
	if !bytes.Equal(got, first) {
		t.Fatalf("the store holds %q at 100 after a flush, want %q", got[100:100+len(second)], second)
	}
}

// Chunks never written are not stored and read as zeros; a chunk written
// all zeros is deleted; Trim deletes the chunks it covers whole and
// leaves the rest.
func testSparseAndTrim(t *testing.T, srv *s3test.Server) {
	v, st := newVolume(t, srv, 8*testChunk)
	if got := chunkObjects(t, srv, st); len(got) != 0 {
		t.Fatalf("a new volume stores chunks %v", got)
	}
	fill := bytes.Repeat([]byte{0xa5}, 8*testChunk)
	if _, err := v.WriteAt(fill[:3*testChunk], 2*testChunk); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	if got := chunkObjects(t, srv, st); len(got) != 3 || got[0] != chunkName(2) || got[2] != chunkName(4) {
		t.Fatalf("chunks %v after writing chunks 2-4", got)
	}
	zero := make([]byte, testChunk)
	p := make([]byte, testChunk)
	if _, err := v.ReadAt(p, 0); err != nil || !bytes.Equal(p, zero) {
		t.Fatalf("an unwritten chunk: %v, or not zeros", err)
	}
	if _, err := v.WriteAt(zero, 3*testChunk); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	if got := chunkObjects(t, srv, st); len(got) != 2 {
		t.Fatalf("chunks %v after zeroing chunk 3", got)
	}
	// From the middle of chunk 2 to the middle of chunk 4: chunk 2 and 4
	// keep their bytes, chunk 3 (whole) is deleted.
	if err := v.Trim(2*testChunk+100, 2*testChunk); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	if got := chunkObjects(t, srv, st); len(got) != 2 || got[0] != chunkName(2) || got[1] != chunkName(4) {
		t.Fatalf("chunks %v after a trim of chunk 3 and parts of 2 and 4", got)
	}
	if err := v.Trim(2*testChunk, 3*testChunk); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	if got := chunkObjects(t, srv, st); len(got) != 0 {
		t.Fatalf("chunks %v after trimming 2-4 whole", got)
	}
	if _, err := v.ReadAt(p, 4*testChunk); err != nil || !bytes.Equal(p, zero) {
		t.Fatalf("a trimmed chunk: %v, or not zeros", err)
	}
}

func flush(t *testing.T, v *Volume) {
	t.Helper()
	if err := v.Flush(); err != nil {
		t.Fatal(err)
	}
}

func testRefusals(t *testing.T, srv *s3test.Server) {
	v, st := newVolume(t, srv, 2*testChunk)
	if _, err := v.WriteAt(make([]byte, 1024), 2*testChunk-512); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Errorf("a write past the end: %v", err)
	}
	if err := v.Trim(testChunk, 2*testChunk); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Errorf("a trim past the end: %v", err)
	}
	ro := reopen(t, st)
	if c := blockdev.CapsOf(ro); !c.ReadOnly || c.Trim {
		t.Errorf("caps of a read-only volume: %+v", c)
	}
	if _, err := ro.WriteAt([]byte{1}, 0); !errors.Is(err, blockdev.ErrReadOnly) {
		t.Errorf("a write to a read-only volume: %v", err)
	}
	v.Close()
	if _, err := v.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a read after Close: %v", err)
	}
	if err := v.Flush(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a flush after Close: %v", err)
	}
}

// A reader going forward gets the next chunks loaded ahead of it (as many
// as readAheadChunks), and they hold what the store holds; a read that
// jumps does not start any.
func testReadAhead(t *testing.T, srv *s3test.Server) {
	v, st := newVolume(t, srv, 32*testChunk)
	data := make([]byte, 32*testChunk)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	if _, err := v.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	r := reopen(t, st)
	n := int64(r.readAheadChunks())
	if n < 2 {
		t.Fatalf("read-ahead of %d chunks by default", n)
	}
	p := make([]byte, 4096)
	read := func(idx int64) {
		t.Helper()
		if _, err := r.ReadAt(p, idx*testChunk); err != nil || !bytes.Equal(p, data[idx*testChunk:][:4096]) {
			t.Fatalf("read of chunk %d: %v, or other bytes", idx, err)
		}
	}
	read(20) // alone: nothing ahead
	read(0)
	read(1) // after 0: chunks 2 to 1+n come
	deadline := time.Now().Add(20 * time.Second)
	for idx := int64(2); idx <= 1+n; idx++ {
		for !r.loaded(idx) {
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d was not read ahead after sequential reads of chunks 0 and 1", idx)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if r.loaded(21) || r.loaded(2+n) {
		t.Fatal("chunks past the read-ahead, or after a lone read, were loaded")
	}
	for idx := int64(2); idx <= 1+n; idx++ {
		read(idx)
	}
}

// loaded reports whether chunk idx is in the cache, loaded.
func (v *Volume) loaded(idx int64) bool {
	v.c.mu.Lock()
	e := v.c.entries[idx]
	v.c.mu.Unlock()
	if e == nil || !e.mu.TryLock() {
		return false
	}
	defer e.mu.Unlock()
	return e.loaded
}
