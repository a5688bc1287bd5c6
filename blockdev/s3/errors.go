package s3

import "syscall"

// The errors a caller acts on carry an errno, so that one that does not
// import this package still tells them apart (errors.Is(err,
// os.ErrNotExist), os.ErrExist, os.ErrPermission).
var (
	// ErrNoVolume: the location holds no volume (no manifest).
	ErrNoVolume error = &errnoError{"no volume at this location", syscall.ENOENT}
	// ErrExists: Create found a volume, or chunks of one, at the location.
	ErrExists error = &errnoError{"a volume exists at this location", syscall.EEXIST}
	// ErrAccessDenied: no credentials were found, or the store refused
	// them or their rights.
	ErrAccessDenied error = &errnoError{"access denied", syscall.EACCES}
	// ErrLocation: not an s3://BUCKET/PREFIX location.
	ErrLocation error = &errnoError{"not an s3://BUCKET/PREFIX location", syscall.EINVAL}
)

type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }
