package argon2

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocBlocks maps n zeroed blocks outside the Go heap, so that freeBlocks
// can hand them straight back to the kernel, which zeroes them again
// before anyone else gets them.
//
// It leaves transparent huge pages to the system's policy. Asking for them
// (MADV_HUGEPAGE) saves TLB misses on the random reads, about a quarter of
// the fill's time at 1 GiB, but in a virtual machine that returns free
// memory to its host, as this one does, fresh huge pages fault in from the
// host at a cost that more than ate the saving: a one-off 1 GiB derivation
// took 3.5 s of CPU with them against 2.3 s without.
func allocBlocks(n int) ([]block, error) {
	if err := roomUnderLimit(uint64(n) * blockSize); err != nil {
		return nil, fmt.Errorf("%w (%d KiB): %v", ErrMemory, n, err)
	}
	b, err := unix.Mmap(-1, 0, n*blockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w (%d KiB): %v", ErrMemory, n, err)
	}
	// The blocks hold what the password derives; keep them out of core
	// dumps (advice only).
	_ = unix.Madvise(b, unix.MADV_DONTDUMP)
	return unsafe.Slice((*block)(unsafe.Pointer(&b[0])), n), nil
}

func freeBlocks(blocks []block) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&blocks[0])), len(blocks)*blockSize)
	if err := unix.Munmap(b); err != nil {
		panic("argon2: munmap: " + err.Error())
	}
}

// runtimeHeadroom is the address space left to the Go runtime beside the
// blocks under a limit (ulimit -v): a map that fits but leaves the
// runtime no room to grow makes it abort the process with a stack trace
// later, where a refused map is a clean "not enough memory".
const runtimeHeadroom = 256 << 20

// roomUnderLimit reports an error when mapping size more bytes would leave
// less than runtimeHeadroom below the process's address-space limit.
func roomUnderLimit(size uint64) error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return nil
	}
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil
	}
	var pages uint64
	if _, err := fmt.Sscan(string(statm), &pages); err != nil {
		return nil
	}
	if used := pages * uint64(os.Getpagesize()); used+size+runtimeHeadroom > lim.Cur {
		return fmt.Errorf("%d bytes of address space in use, limit %d", used, lim.Cur)
	}
	return nil
}
