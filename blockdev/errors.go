package blockdev

import "errors"

var (
	// ErrNotSupported is returned by an optional operation (Trim, ...) that
	// this device does not offer. Frontends report it as "not supported".
	ErrNotSupported = errors.New("operation not supported by the device")
	// ErrReadOnly is returned by writes to a read-only device. Frontends
	// report it as EPERM.
	ErrReadOnly = errors.New("device is read-only")
	// ErrOutOfRange is returned for a request that reaches outside the
	// device. Frontends report it as EINVAL (reads) or ENOSPC (writes).
	ErrOutOfRange = errors.New("request outside the device")
)
