package luks2

import (
	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/internal/populated"
)

// hotzoneBuffer returns n bytes for a reencryption's hotzone and the
// function that gives them back. They are mapped populated (faulting in
// 64 MiB of small pages one by one, as a fresh Go slice does on first
// touch, took a third of a 1 GiB reencryption's time on tmpfs here).
// They hold the data's plaintext for a moment, so they are kept out of
// core dumps, and unmapping them hands them back to the kernel, which
// zeroes them before anyone else gets them.
func hotzoneBuffer(n int) ([]byte, func()) {
	b, err := populated.Map(n)
	if err != nil {
		b := make([]byte, n)
		return b, func() { clear(b) }
	}
	_ = unix.Madvise(b, unix.MADV_DONTDUMP) // advice only
	return b, func() { _ = unix.Munmap(b) }
}
