package blockdev

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A location says where a volume's bytes live: a local path (an image file
// or a block device), or a URL whose scheme a backend package registered
// (s3://bucket/key, nbd://host/export). Open is the one place that turns a
// location into a Device; adding a backend is a package that calls
// Register from init, and an import of it where the program is wired.

// Backend is what Open returns: a Device behind the Tracked layer, which
// answers for its acknowledged writes, and that says how it holds what it
// opened.
type Backend interface {
	Device
	// LostWrites and TakeLostWrites: see Tracked.
	LostWrites(off, length int64) error
	TakeLostWrites() error
	// Claim says how the device is claimed ("O_EXCL", "OFD lock"), or ""
	// when it is not.
	Claim() string
}

// An Opener opens a location of the scheme it was registered for, as opts
// say: with opts.Exclusive it claims what it opens for as long as it is
// open, and fails with an error matching ErrInUse when someone else has.
type Opener func(location string, opts OpenOptions) (Device, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes Open hand the locations of scheme ("s3" for
// s3://bucket/key) to open. Backend packages call it from init;
// registering a scheme twice panics.
func Register(scheme string, open Opener) { register(openers, "Register", scheme, open) }

// register adds f to the table of scheme; a scheme twice panics.
func register[F any](table map[string]F, what, scheme string, f F) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := table[scheme]; dup || !validScheme(scheme) {
		panic("blockdev: " + what + " of scheme " + scheme + " twice, or not a scheme")
	}
	table[scheme] = f
}

// A Creator makes a new volume at a location of its scheme, for stores
// where a volume is more than a name (an object store records its size
// and layout); it fails with an error matching os.ErrExist when one is
// there.
type Creator func(location string, opts CreateOptions) error

// CreateOptions are a new volume's size and layout.
type CreateOptions struct {
	Size int64
	// ChunkSize is the size of the objects a store keeps the volume in (0:
	// the store's default); a store without chunks refuses any other.
	ChunkSize int64
}

var creators = map[string]Creator{}

// RegisterCreator makes Create hand the locations of scheme to create.
// Registering a scheme twice panics.
func RegisterCreator(scheme string, create Creator) {
	register(creators, "RegisterCreator", scheme, create)
}

// Create makes a new volume at location. A local path, or a URL whose
// backend has nothing to create, fails with ErrNotSupported; a scheme
// nobody registered with a *SchemeError.
func Create(location string, opts CreateOptions) error {
	scheme := Scheme(location)
	openersMu.RLock()
	create, open := creators[scheme], openers[scheme]
	openersMu.RUnlock()
	switch {
	case create != nil:
		return create(location, opts)
	case scheme != "" && open == nil:
		return &SchemeError{Location: location, Scheme: scheme}
	}
	return ErrNotSupported
}

// Open opens location: a local path as a File, a URL with the backend its
// scheme registered, behind the Tracked layer when the backend does not
// track its writes itself. A URL of a scheme nobody registered fails with
// a *SchemeError.
func Open(location string, opts OpenOptions) (Backend, error) {
	scheme := Scheme(location)
	if scheme == "" {
		return openFile(location, opts)
	}
	openersMu.RLock()
	open := openers[scheme]
	openersMu.RUnlock()
	if open == nil {
		return nil, &SchemeError{Location: location, Scheme: scheme}
	}
	dev, err := open(location, opts)
	if err != nil {
		return nil, err
	}
	if b, ok := dev.(Backend); ok {
		return b, nil
	}
	return unclaimed{Track(dev)}, nil
}

// unclaimed is a registered backend's device that claims nothing.
type unclaimed struct{ *Tracked }

func (unclaimed) Claim() string { return "" }

// OpenPath opens a local path as an *os.File of its own, for a caller that
// needs the file rather than a Device: header edits lock it by path, grow
// an image file and fsync it. It refuses what Open refuses, and a URL too
// (its backend serves Devices only). size is the file's or the block
// device's size.
func OpenPath(location string, write bool) (f *os.File, size int64, err error) {
	if scheme := Scheme(location); scheme != "" {
		return nil, 0, &SchemeError{Location: location, Scheme: scheme}
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, size, _, err = openLocal(location, flag)
	return f, size, err
}

// Scheme returns location's URL scheme ("s3" for s3://bucket/key), or ""
// for a local path. A location is a URL when it starts with a scheme (a
// letter, then letters, digits, '+', '-' or '.') and "://".
func Scheme(location string) string {
	for i := 0; i < len(location); i++ {
		if location[i] == ':' {
			if i > 0 && len(location) >= i+3 && location[i+1:i+3] == "//" && validScheme(location[:i]) {
				return location[:i]
			}
			return ""
		}
	}
	return ""
}

func validScheme(s string) bool {
	for i, c := range []byte(s) {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

var (
	// ErrUnknownScheme is matched by the error of Open for a URL whose
	// scheme no backend registered (see SchemeError).
	ErrUnknownScheme = errors.New("unknown location scheme")
	// ErrNotDevice: a local path that is neither a regular file nor a
	// block device (a directory, a FIFO, a character device).
	ErrNotDevice = errors.New("not a regular file or block device")
	// ErrNoSize: the size of a block device could not be read.
	ErrNoSize = errors.New("cannot get the size of the device")
)

// SchemeError is Open's refusal of a URL it has no backend for.
type SchemeError struct {
	Location, Scheme string
}

func (e *SchemeError) Error() string {
	return fmt.Sprintf("unknown location scheme %s (%s)", e.Scheme, e.Location)
}

func (e *SchemeError) Unwrap() error { return ErrUnknownScheme }

// openLocal opens path with flag and sizes it. What the path names is
// checked before it is opened, so that opening a FIFO cannot block, and
// again after (it may have been replaced in between).
func openLocal(path string, flag int) (f *os.File, size int64, isBlock bool, err error) {
	if fi, err := os.Stat(path); err == nil && !localKind(fi.Mode()) {
		return nil, 0, false, &os.PathError{Op: "open", Path: path, Err: ErrNotDevice}
	}
	f, err = os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, 0, false, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = &os.PathError{Op: "stat", Path: path, Err: fmt.Errorf("%w: %w", ErrNoSize, err)}
	case !localKind(fi.Mode()):
		err = &os.PathError{Op: "open", Path: path, Err: ErrNotDevice}
	}
	if err != nil {
		f.Close()
		return nil, 0, false, err
	}
	if fi.Mode().IsRegular() {
		return f, fi.Size(), false, nil
	}
	var sz uint64
	if err := ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&sz)); err != nil {
		f.Close()
		return nil, 0, false, &os.PathError{Op: "BLKGETSIZE64", Path: path, Err: fmt.Errorf("%w: %w", ErrNoSize, err)}
	}
	return f, int64(sz), true, nil
}

// localKind reports whether mode is a regular file or a block device.
func localKind(mode os.FileMode) bool {
	return mode.IsRegular() || mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0
}
