package blockdev

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Remeasurer is a Device whose size can follow the device below it while
// it is open (luksd resize, after the image file or block device grew or
// shrank): Remeasure reads the size again and adopts it.
type Remeasurer interface {
	Remeasure() (int64, error)
}

// Remeasure reads the size of the file or block device again and adopts
// it. A loop device is told to take its backing file's size first
// (LOOP_SET_CAPACITY), as cryptsetup resize does.
func (d *File) Remeasure() (int64, error) { return d.io.remeasure() }

func (d *fileIO) remeasure() (int64, error) {
	size, err := d.measure()
	if err != nil {
		return 0, err
	}
	d.size.Store(size)
	return size, nil
}

// measure returns the current size; it grows a loop device to its
// backing file's size on the way (a failure there leaves the old size,
// which the caller then sees).
func (d *fileIO) measure() (int64, error) {
	if !d.isBlock {
		var st unix.Stat_t
		if err := unix.Fstat(d.fd, &st); err != nil {
			return 0, &os.PathError{Op: "fstat", Path: d.path, Err: err}
		}
		return st.Size, nil
	}
	if _, err := unix.IoctlLoopGetStatus64(d.fd); err == nil {
		// Not fatal, as in cryptsetup: the size below is what counts.
		unix.IoctlSetInt(d.fd, unix.LOOP_SET_CAPACITY, 0)
	}
	var sz uint64
	if err := ioctlPtr(d.f, unix.BLKGETSIZE64, unsafe.Pointer(&sz)); err != nil {
		return 0, &os.PathError{Op: "BLKGETSIZE64", Path: d.path, Err: fmt.Errorf("%w: %w", ErrNoSize, err)}
	}
	return int64(sz), nil
}
