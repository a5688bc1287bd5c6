package luks2

import "golang.org/x/sys/unix"

// hotzoneBuffer returns n bytes for a reencryption's hotzone and the
// function that gives them back. They are mapped outside the Go heap,
// where the kernel allows it in transparent huge pages, and populated at
// once: faulting in 64 MiB of small pages one by one, as a fresh Go slice
// does on first touch, took a third of a 1 GiB reencryption's time on
// tmpfs here. They hold the data's plaintext for a moment, so they are
// kept out of core dumps, and unmapping them hands them back to the
// kernel, which zeroes them before anyone else gets them.
func hotzoneBuffer(n int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b := make([]byte, n)
		return b, func() { clear(b) }
	}
	// Advice only: each fails harmlessly where the kernel does not offer
	// it (the pages are then small, or faulted in as first touched).
	_ = unix.Madvise(b, unix.MADV_DONTDUMP)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	return b, func() { _ = unix.Munmap(b) }
}
