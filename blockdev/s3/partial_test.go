package s3

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// countingClient counts the requests for chunk objects, by method.
type countingClient struct {
	next s3.HTTPClient
	mu   sync.Mutex
	n    map[string]int
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/"+chunkPrefix) {
		c.mu.Lock()
		c.n[r.Method]++
		c.mu.Unlock()
	}
	return c.next.Do(r)
}

// take returns the counts so far and starts again from zero.
func (c *countingClient) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// countedVolume creates a volume of size bytes in chunks of testChunk and
// opens it with opts through a client that counts its chunk requests.
func countedVolume(t *testing.T, srv *s3test.Server, size int64, opts Options) (*Volume, *Store, *countingClient) {
	t.Helper()
	cc := &countingClient{next: http.DefaultClient, n: map[string]int{}}
	api := s3.New(srv.Client().Options(), func(o *s3.Options) { o.HTTPClient = cc })
	st := NewStore(api, srv.Bucket(), "counted")
	if err := Create(st, size, testChunk); err != nil {
		t.Fatal(err)
	}
	v, err := OpenVolume(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, st, cc
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31+i>>9) ^ seed
	}
	return p
}

// A sequential writer in pieces smaller than a chunk, over chunks not
// stored and then over chunks stored, reads nothing from the store and
// uploads each chunk once.
func testSequentialNoReads(t *testing.T, srv *s3test.Server) {
	const chunks = 2 * passedChunks
	v, st, cc := countedVolume(t, srv, chunks*testChunk, Options{WriteDelay: time.Hour})
	for pass := range byte(2) {
		if pass > 0 {
			// Opened again: the chunks stored, none cached.
			v.Close()
			var err error
			if v, err = OpenVolume(st, Options{WriteDelay: time.Hour}); err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			cc.take()
		}
		data := pattern(chunks*testChunk, pass)
		for off := 0; off < len(data); off += testChunk / 4 {
			if _, err := v.WriteAt(data[off:off+testChunk/4], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
		flush(t, v)
		// Uploaded, the chunks the writer filled are dropped but the last few.
		if b := v.cachedBytes(); b > passedChunks*testChunk {
			t.Errorf("pass %d: %d bytes cached after a sequential write, want %d at most", pass, b, passedChunks*testChunk)
		}
		if n := cc.take(); n["GET"] != 0 || n["PUT"] != chunks {
			t.Errorf("pass %d: chunk requests %v, want %d PUTs and no GET", pass, n, chunks)
		}
		got := make([]byte, len(data))
		if _, err := reopen(t, st).ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("pass %d: the store does not hold the writes (%v)", pass, err)
		}
		cc.take()
	}
}

// A partial write of a stored chunk not cached keeps the chunk's other
// bytes: reads of what it wrote need no request, a read of the rest and
// the upload load the chunk once.
func testPartialMerge(t *testing.T, srv *s3test.Server) {
	v, st, cc := countedVolume(t, srv, 2*testChunk, Options{WriteDelay: time.Hour})
	old := pattern(2*testChunk, 1)
	if _, err := v.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	flush(t, v)
	v.Close()
	v, err := OpenVolume(st, Options{WriteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cc.take()

	want := bytes.Clone(old)
	for _, w := range []struct{ off, n int }{{100, 1000}, {5000, 3000}, {testChunk + 4096, 4096}, {testChunk + 8192, 100}} {
		p := pattern(w.n, 9)
		copy(want[w.off:], p)
		if _, err := v.WriteAt(p, int64(w.off)); err != nil {
			t.Fatal(err)
		}
	}
	p := make([]byte, 4196)
	if _, err := v.ReadAt(p, testChunk+4096); err != nil || !bytes.Equal(p, want[testChunk+4096:][:4196]) {
		t.Fatalf("a read of bytes just written: %v, or other bytes", err)
	}
	if n := cc.take(); len(n) != 0 {
		t.Fatalf("writes and a read of their bytes made chunk requests %v", n)
	}
	if _, err := v.ReadAt(p[:2000], 0); err != nil || !bytes.Equal(p[:2000], want[:2000]) {
		t.Fatalf("a read around bytes written: %v, or other bytes", err)
	}
	if n := cc.take(); n["GET"] != 1 || len(n) != 1 {
		t.Fatalf("a read around bytes written made chunk requests %v, want one GET", n)
	}
	flush(t, v)
	if n := cc.take(); n["GET"] != 1 || n["PUT"] != 2 || len(n) != 2 {
		t.Fatalf("the flush made chunk requests %v, want one GET (chunk 1) and 2 PUTs", n)
	}
	got := make([]byte, len(want))
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the store does not hold the writes over the old bytes (%v)", err)
	}
}

// A writer waiting for room among the dirty chunks has the whole ones
// uploaded, not one still being filled.
func testFillingNotHurried(t *testing.T, srv *s3test.Server) {
	v, st, cc := countedVolume(t, srv, 3*testChunk, Options{DirtyBytes: 2 * testChunk, WriteDelay: time.Hour})
	data := pattern(3*testChunk, 3)
	write := func(lo, hi int) {
		t.Helper()
		if _, err := v.WriteAt(data[lo:hi], int64(lo)); err != nil {
			t.Fatal(err)
		}
	}
	write(0, testChunk/2)         // chunk 0 half filled
	write(testChunk, 2*testChunk) // chunk 1 whole: the bound
	write(2*testChunk, 3*testChunk)
	write(testChunk/2, testChunk)
	flush(t, v)
	if n := cc.take(); n["GET"] != 0 || n["PUT"] != 3 {
		t.Errorf("chunk requests %v, want 3 PUTs and no GET", n)
	}
	got := make([]byte, len(data))
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the store does not hold the writes (%v)", err)
	}
}

// When every dirty chunk is still being filled, a writer waiting for room
// has them uploaded (read and merged) rather than wait for ever.
func testRoomFromPartial(t *testing.T, srv *s3test.Server) {
	v, st, _ := countedVolume(t, srv, 3*testChunk, Options{DirtyBytes: 2 * testChunk, WriteDelay: time.Hour})
	v.st.Timeout = 5 * time.Second // a writer that waits this long fails
	want := make([]byte, 3*testChunk)
	for idx := range 3 {
		p := pattern(100, byte(idx))
		off := idx*testChunk + 1000
		copy(want[off:], p)
		if _, err := v.WriteAt(p, int64(off)); err != nil {
			t.Fatalf("a partial write of chunk %d, chunks 0 to %d partly written: %v", idx, idx-1, err)
		}
	}
	flush(t, v)
	got := make([]byte, len(want))
	if _, err := reopen(t, st).ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the store does not hold the writes (%v)", err)
	}
}

func TestExtents(t *testing.T) {
	var x extents
	for _, r := range []extent{{10, 20}, {30, 40}, {20, 25}, {50, 60}, {0, 5}, {39, 51}} {
		x = x.add(r.lo, r.hi)
	}
	want := extents{{0, 5}, {10, 25}, {30, 60}}
	if len(x) != len(want) {
		t.Fatalf("extents %v, want %v", x, want)
	}
	for i := range x {
		if x[i] != want[i] {
			t.Fatalf("extents %v, want %v", x, want)
		}
	}
	for _, c := range []struct {
		lo, hi int64
		in     bool
	}{{0, 5, true}, {1, 4, true}, {4, 6, false}, {10, 25, true}, {24, 31, false}, {30, 60, true}, {60, 61, false}, {5, 10, false}} {
		if x.covers(c.lo, c.hi) != c.in {
			t.Errorf("covers(%d, %d) = %v", c.lo, c.hi, !c.in)
		}
	}
	var gaps []extent
	x.gaps(70, func(lo, hi int64) { gaps = append(gaps, extent{lo, hi}) })
	if len(gaps) != 3 || gaps[0] != (extent{5, 10}) || gaps[1] != (extent{25, 30}) || gaps[2] != (extent{60, 70}) {
		t.Errorf("gaps %v", gaps)
	}
}

// A chunk reserved for a write is not due for upload before its
// WriteDelay, even when the scheduler looks between the reservation and
// the write (it ran late once, on a loaded machine, and uploaded, loading
// the chunk first, what it should have left to fill).
func testReservedNotDue(t *testing.T, srv *s3test.Server) {
	v, _, cc := countedVolume(t, srv, 2*testChunk, Options{WriteDelay: time.Hour})
	cc.take()
	started := -1
	v.hooks.reserved = func(int64) {
		v.c.mu.Lock()
		v.startDue(time.Now())
		started = v.c.active
		v.c.mu.Unlock()
	}
	if _, err := v.WriteAt(pattern(1000, 3), 100); err != nil {
		t.Fatal(err)
	}
	v.hooks.reserved = nil
	if started != 0 {
		t.Fatalf("the scheduler started %d uploads of a chunk just reserved", started)
	}
	if n := cc.take(); len(n) != 0 {
		t.Fatalf("a write made chunk requests %v", n)
	}
}
