package s3

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/internal/populated"
)

// The cache's chunks live outside the Go heap, each in its own anonymous
// mapping, unmapped when the chunk leaves the cache: the garbage collector
// lets the heap grow to twice what is live before it collects, so chunks
// on the heap could take twice the cache's bound, and memory it frees
// goes back to the kernel only later. Mapped, the cache's bytes are
// resident while cached (and a few kept for reuse, below).
//
// Only the cache's own entries use them (never a buffer handed to the
// SDK, which may still read a request body after the call returned), and
// an entry's data is freed only with its mu held or once it is out of
// the cache, unreferenced.

// A few freed chunks are kept for reuse (spareChunks, and spareBytes at
// most): a reader streaming through the volume evicts a chunk for each it
// loads, and an unmap per chunk stops every thread of the process for a
// TLB flush.
const (
	spareChunks = 8
	spareBytes  = 32 << 20
)

var spare struct {
	mu    sync.Mutex
	bufs  [][]byte
	bytes int
	// mapped counts the bytes of chunk mappings alive, spares included,
	// and peak the most at once (for tests of the cache's bound).
	mapped, peak int64
}

// allocChunk returns n zero bytes outside the Go heap.
func allocChunk(n int64) []byte {
	b, reused := takeChunk(n)
	if reused {
		clear(b)
	}
	return b
}

// allocChunkUncleared returns n bytes outside the Go heap, for a caller
// that overwrites them all: a spare one keeps what it held.
func allocChunkUncleared(n int64) []byte {
	b, _ := takeChunk(n)
	return b
}

// takeChunk returns a spare chunk of n bytes (reused), or a new mapping
// of zeros, its pages populated at once (one call, rather than a fault
// for each page as it is first written) and, where the kernel allows
// it, in transparent huge pages: a chunk of 2 MiB or more then costs a
// few page allocations, where in 4 KiB pages (MAP_POPULATE) it cost 3 ms
// per 4 MiB, ten times as much, which a stream's reads and writes paid
// for each chunk they could not take from the spares.
func takeChunk(n int64) (b []byte, reused bool) {
	spare.mu.Lock()
	for i, b := range spare.bufs {
		if int64(len(b)) == n {
			spare.bufs = append(spare.bufs[:i], spare.bufs[i+1:]...)
			spare.bytes -= len(b)
			spare.mu.Unlock()
			return b, true
		}
	}
	spare.mapped += n
	spare.peak = max(spare.peak, spare.mapped)
	spare.mu.Unlock()
	return mapChunk(int(n)), false
}

// mapChunk maps n bytes of zeros, populated (populated.Map).
func mapChunk(n int) []byte {
	b, err := populated.Map(n)
	if err != nil {
		panic(fmt.Sprintf("s3: cannot map a chunk of %d bytes: %v", n, err))
	}
	return b
}

// trimSpares unmaps spare chunks until they hold at most room bytes: the
// cache's room left (evictTo), so that spares count within its bound.
func trimSpares(room int64) {
	spare.mu.Lock()
	var drop [][]byte
	for len(spare.bufs) > 0 && int64(spare.bytes) > room {
		b := spare.bufs[len(spare.bufs)-1]
		spare.bufs = spare.bufs[:len(spare.bufs)-1]
		spare.bytes -= len(b)
		spare.mapped -= int64(len(b))
		drop = append(drop, b)
	}
	spare.mu.Unlock()
	for _, b := range drop {
		unix.Munmap(b)
	}
}

// freeChunk gives back a chunk from allocChunk; nil is ignored.
func freeChunk(b []byte) {
	if b == nil {
		return
	}
	spare.mu.Lock()
	if len(spare.bufs) < spareChunks && spare.bytes+len(b) <= spareBytes {
		spare.bufs = append(spare.bufs, b)
		spare.bytes += len(b)
		spare.mu.Unlock()
		return
	}
	spare.mapped -= int64(len(b))
	spare.mu.Unlock()
	unix.Munmap(b)
}
