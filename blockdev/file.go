package blockdev

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// File is a Device over a regular file or a block device. Reads and writes
// are pread/pwrite on one descriptor, so any number may run at once.
type File struct {
	f        *os.File
	path     string
	size     int64
	isBlock  bool
	readOnly bool
}

// OpenFile opens a regular file or a block device. The size is taken once,
// at open: a regular file is not grown by writes past its end (those fail).
func OpenFile(path string, readOnly bool) (*File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	d := &File{f: f, path: path, readOnly: readOnly}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case fi.Mode().IsRegular():
		d.size = fi.Size()
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		d.isBlock = true
		var sz uint64
		if err := ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&sz)); err != nil {
			f.Close()
			return nil, &os.PathError{Op: "BLKGETSIZE64", Path: path, Err: err}
		}
		d.size = int64(sz)
	default:
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file or block device", path)
	}
	return d, nil
}

// Path returns the path the device was opened with.
func (d *File) Path() string { return d.path }

// Size returns the size in bytes taken at open.
func (d *File) Size() int64 { return d.size }

// ReadOnly reports whether the device was opened read-only.
func (d *File) ReadOnly() bool { return d.readOnly }

// ReadAt reads len(p) bytes at off (pread).
func (d *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = d.opError("read", off, len(p), err)
	}
	return n, err
}

// WriteAt writes p at off (pwrite). Writes reaching past Size fail with
// ErrOutOfRange.
func (d *File) WriteAt(p []byte, off int64) (int, error) {
	if d.readOnly {
		return 0, d.opError("write", off, len(p), ErrReadOnly)
	}
	if off < 0 || off > d.size || int64(len(p)) > d.size-off {
		return 0, d.opError("write", off, len(p), ErrOutOfRange)
	}
	n, err := d.f.WriteAt(p, off)
	if err != nil {
		err = d.opError("write", off, len(p), err)
	}
	return n, err
}

// Flush makes completed writes durable (fdatasync).
func (d *File) Flush() error {
	if d.readOnly {
		return nil
	}
	if err := ignoreEINTR(func() error { return unix.Fdatasync(int(d.f.Fd())) }); err != nil {
		return &os.PathError{Op: "fdatasync", Path: d.path, Err: err}
	}
	return nil
}

// Trim discards the range: a hole punched in a regular file, BLKDISCARD on
// a block device. Afterwards the range reads as zeroes (file) or as
// whatever the device returns for discarded blocks.
func (d *File) Trim(off, length int64) error {
	if err := d.check("trim", off, length); err != nil {
		return err
	}
	if length == 0 {
		return nil
	}
	err := d.rangeCall(unix.BLKDISCARD, unix.FALLOC_FL_PUNCH_HOLE, off, length)
	if err == unix.EOPNOTSUPP || err == unix.ENOTTY {
		return d.opError("trim", off, int(length), ErrNotSupported)
	}
	if err != nil {
		return d.opError("trim", off, int(length), err)
	}
	return nil
}

// WriteZeroes makes the range read as zeroes: BLKZEROOUT on a block device,
// fallocate(ZERO_RANGE) on a file, or writes of a zeroed buffer where
// neither is available.
func (d *File) WriteZeroes(off, length int64) error {
	if err := d.check("write zeroes", off, length); err != nil {
		return err
	}
	if length == 0 {
		return nil
	}
	err := d.rangeCall(unix.BLKZEROOUT, unix.FALLOC_FL_ZERO_RANGE, off, length)
	if err == nil {
		return nil
	}
	if err != unix.EOPNOTSUPP && err != unix.ENOTTY && err != unix.EINVAL {
		return d.opError("write zeroes", off, int(length), err)
	}
	zero := make([]byte, min(length, 1<<20))
	for length > 0 {
		n := min(length, int64(len(zero)))
		if _, err := d.WriteAt(zero[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}

// rangeCall asks the kernel to act on [off, off+length): the block-device
// ioctl req, or fallocate with mode (size kept) on a regular file.
func (d *File) rangeCall(req uint, mode uint32, off, length int64) error {
	if d.isBlock {
		r := [2]uint64{uint64(off), uint64(length)}
		return ioctlPtr(d.f, req, unsafe.Pointer(&r))
	}
	return ignoreEINTR(func() error {
		return unix.Fallocate(int(d.f.Fd()), mode|unix.FALLOC_FL_KEEP_SIZE, off, length)
	})
}

// Close closes the descriptor.
func (d *File) Close() error { return d.f.Close() }

func (d *File) check(op string, off, length int64) error {
	if d.readOnly {
		return d.opError(op, off, int(length), ErrReadOnly)
	}
	if off < 0 || length < 0 || off > d.size || length > d.size-off {
		return d.opError(op, off, int(length), ErrOutOfRange)
	}
	return nil
}

func (d *File) opError(op string, off int64, n int, err error) error {
	return &OpError{Op: op, Path: d.path, Off: off, Len: int64(n), Err: err}
}

// OpError says which operation on which range of which device failed.
type OpError struct {
	Op   string
	Path string
	Off  int64
	Len  int64
	Err  error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("%s %s: %d bytes at offset %d: %v", e.Op, e.Path, e.Len, e.Off, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

func ioctlPtr(f *os.File, req uint, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno error
	if err := rc.Control(func(fd uintptr) {
		errno = ignoreEINTR(func() error {
			_, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
			if e != 0 {
				return e
			}
			return nil
		})
	}); err != nil {
		return err
	}
	return errno
}

func ignoreEINTR(fn func() error) error {
	for {
		err := fn()
		if err != unix.EINTR {
			return err
		}
	}
}
