package blockdev

import (
	"errors"
	"syscall"
)

// The sentinel errors carry the errno a kernel frontend should answer with:
// errors.As(err, &errno) finds it, so a frontend that maps errors by errno
// gets the right one without knowing blockdev's sentinels.
var (
	// ErrNotSupported is returned by an optional operation (Trim, ...) that
	// this device does not offer (EOPNOTSUPP).
	ErrNotSupported error = &errnoError{"operation not supported by the device", syscall.EOPNOTSUPP}
	// ErrReadOnly is returned by writes to a read-only device (EROFS).
	ErrReadOnly error = &errnoError{"device is read-only", syscall.EROFS}
	// ErrOutOfRange is returned for a request that reaches outside the
	// device (EINVAL). NBD reports it as EINVAL (reads) or ENOSPC (writes).
	ErrOutOfRange error = &errnoError{"request outside the device", syscall.EINVAL}
	// ErrLostWrites is matched (errors.Is) by the error of a Flush while
	// an acknowledged write may not have reached the device: see Tracked.
	ErrLostWrites = errors.New("acknowledged writes may not have reached the device")
	// ErrInUse is returned when a device is claimed, mounted or mapped by
	// someone else (EBUSY): see Claim.
	ErrInUse error = &errnoError{"device is in use", syscall.EBUSY}
)

type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }
