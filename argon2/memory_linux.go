package argon2

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocBlocks maps n zeroed blocks outside the Go heap, asking for
// transparent huge pages: a derivation reads its memory at random, and
// 4 KiB pages would cost a page fault per four blocks and a TLB miss on
// nearly every reference block. The kernel zeroes the pages again before
// anyone else gets them, so freeBlocks need not wipe them.
func allocBlocks(n int) ([]block, error) {
	b, err := unix.Mmap(-1, 0, n*blockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w (%d KiB): %v", ErrMemory, n, err)
	}
	// Only advice: without THP (or with it disabled) small pages work.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	// The blocks hold what the password derives; keep them out of core
	// dumps.
	_ = unix.Madvise(b, unix.MADV_DONTDUMP)
	return unsafe.Slice((*block)(unsafe.Pointer(&b[0])), n), nil
}

func freeBlocks(blocks []block) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&blocks[0])), len(blocks)*blockSize)
	if err := unix.Munmap(b); err != nil {
		panic("argon2: munmap: " + err.Error())
	}
}
