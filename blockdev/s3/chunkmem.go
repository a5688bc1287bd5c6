package s3

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The cache's chunks live outside the Go heap, each in its own anonymous
// mapping, unmapped when the chunk leaves the cache: the garbage collector
// lets the heap grow to twice what is live before it collects, so chunks
// on the heap could take twice the cache's bound, and memory it frees
// goes back to the kernel only later. Mapped, the cache's bytes are
// resident exactly while cached. A chunk is at least 64 KiB, so a mapping
// per chunk costs little beside the store request that fills it.
//
// Only the cache's own entries use them (never a buffer handed to the
// SDK, which may still read a request body after the call returned), and
// an entry's data is freed only with its mu held or once it is out of
// the cache, unreferenced.

// allocChunk returns n zero bytes outside the Go heap.
func allocChunk(n int64) []byte {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(fmt.Sprintf("s3: cannot map a chunk of %d bytes: %v", n, err))
	}
	return b
}

// freeChunk unmaps a chunk from allocChunk; nil is ignored.
func freeChunk(b []byte) {
	if b != nil {
		unix.Munmap(b)
	}
}
