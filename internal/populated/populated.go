// Package populated maps anonymous memory whose pages are all there from
// the start.
package populated

import "golang.org/x/sys/unix"

// hugePage is the size of a transparent huge page on the architectures
// luksd runs on (x86-64, arm64 with 4 KiB pages); a smaller mapping
// cannot hold one.
const hugePage = 2 << 20

// Map maps n bytes of zeros outside the Go heap, its pages populated at
// once (one call, rather than a fault for each page as it is first
// touched, which is expensive on virtual machines) and, from 2 MiB and
// where the kernel allows it, in transparent huge pages: a few page
// allocations instead of one per 4 KiB. Give it back with unix.Munmap.
func Map(n int) ([]byte, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if n < hugePage {
		flags |= unix.MAP_POPULATE
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil || n < hugePage {
		return b, err
	}
	// Both fail harmlessly: huge pages off or not offered for anonymous
	// memory (the pages are then small), MADV_POPULATE_WRITE before Linux
	// 5.14 (the pages are then faulted in as first written).
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	return b, nil
}
