package luks2

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/luksd/luksd/blockdev"
)

// File is what a HeaderFile reads and writes: a local image file or block
// device (*os.File), or a volume in a remote store, which the caller opens
// with LockName set (it has no path to flock or reopen) and whose Stat and
// Truncate may fail.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

var _ File = (*os.File)(nil)

// HeaderFile is an open device (or detached header file) holding a LUKS
// header, used under cryptsetup 2.6.1's metadata locks (LockHeader): the
// header is read under the shared lock and edited under the exclusive
// one, so that luksd and cryptsetup never interleave their reads and
// writes. An edit also refuses a header that changed since it was read
// (another editor got there first), so a second editor waits, then fails
// cleanly.
type HeaderFile struct {
	File
	Path    string
	Size    int64
	NoLocks bool // --disable-locks: take no locks, repair nothing
	// LockName, for a device with no local path (a remote volume), names
	// its metadata lock: the file LockDir/LockName (LockNamed), or none
	// when LockDir cannot be used (an unprivileged user).
	LockName string
	// LUKS2Only: read a LUKS2 header whatever the primary's version says
	// (--type luks2, and the LUKS2-only verbs).
	LUKS2Only bool

	lock      *Lock // held while a read or an edit runs
	exclusive bool
}

var _ Device = (*HeaderFile)(nil)

// LockError: the metadata lock on Path could not be taken.
type LockError struct {
	Path      string
	Exclusive bool
	Err       error
}

func (e *LockError) Error() string {
	kind := "read"
	if e.Exclusive {
		kind = "write"
	}
	return fmt.Sprintf("cannot take the %s lock on %s: %v", kind, e.Path, e.Err)
}

func (e *LockError) Unwrap() error { return e.Err }

// ErrAmbiguous: a header copy needs repair and the device holds another
// signature, which cryptsetup will not overwrite.
var ErrAmbiguous = fmt.Errorf("%w: device contains ambiguous signatures", ErrNotLUKS)

// Read reads the header under the shared lock. When one LUKS2 copy is not
// good, it does what cryptsetup does on load: it refuses a device that
// also holds another signature (ErrAmbiguous), and otherwise, with locks
// on and the device writable, reads the header again under the exclusive
// lock and rewrites the bad copy from the good one (a failed repair is no
// error).
func (d *HeaderFile) Read() (*Header, error) {
	readFn := Read
	if d.LUKS2Only {
		readFn = ReadLUKS2
	}
	var h *Header
	err := d.Locked(false, func() error {
		var err error
		h, err = readFn(d, d.Size)
		return err
	})
	if err != nil || !h.Damaged() {
		return h, err
	}
	if ForeignSignature(d) != "" {
		return nil, ErrAmbiguous
	}
	if d.NoLocks {
		return h, nil
	}
	rw, err := os.OpenFile(d.Path, os.O_RDWR, 0)
	if err != nil {
		return h, nil
	}
	defer rw.Close()
	w := &HeaderFile{File: rw, Path: d.Path, Size: d.Size}
	err = w.Locked(true, func() error {
		again, err := readFn(w, w.Size)
		if err != nil {
			return err
		}
		h = again
		h.Repair(w)
		return nil
	})
	return h, err
}

// Flush makes the writes durable (fsync).
func (d *HeaderFile) Flush() error { return d.Sync() }

// ReadAt reads under the shared lock unless a lock is held already: a
// keyslot's area, read between reading the header and editing it, is never
// read while another process rewrites it.
func (d *HeaderFile) ReadAt(p []byte, off int64) (int, error) {
	if d.lock != nil || d.NoLocks {
		return d.File.ReadAt(p, off)
	}
	var n int
	err := d.Locked(false, func() error {
		var err error
		n, err = d.File.ReadAt(p, off)
		return err
	})
	return n, err
}

// Locked runs fn holding the shared or the exclusive lock; a lock already
// held (an exclusive one, or the shared one for a reader) is used as it
// is. A lock it cannot take is a *LockError.
func (d *HeaderFile) Locked(exclusive bool, fn func() error) error {
	if d.NoLocks || d.lock != nil && (d.exclusive || !exclusive) {
		return fn()
	}
	if d.lock != nil {
		// A reader turning editor: cryptsetup drops its read lock first.
		d.lock.Unlock()
		d.lock = nil
	}
	var l *Lock
	var err error
	if d.LockName != "" {
		l, err = LockNamed(d.LockName, exclusive)
		if errors.Is(err, ErrLocking) {
			// No lock folder this user may use (luksd unprivileged on
			// its own remote volume): go on as with --disable-locks,
			// where cryptsetup would have nothing to lock either. The
			// refresh below still reads what the store holds.
			l, err = &Lock{}, nil
		}
	} else {
		l, err = LockHeader(d.Path, exclusive)
	}
	if err != nil {
		return &LockError{Path: d.Path, Exclusive: exclusive, Err: err}
	}
	d.lock, d.exclusive = l, exclusive
	defer func() {
		d.lock.Unlock()
		d.lock, d.exclusive = nil, false
	}()
	// A remote volume's cache may hold what another editor has rewritten
	// since: read and edit from what the store holds.
	if r, ok := d.File.(blockdev.Refresher); ok {
		if err := r.Refresh(); err != nil {
			return err
		}
	}
	return fn()
}

// Edit runs fn, an edit of the header, under the exclusive lock and makes
// what it wrote durable (a failure there is a *SyncError) before the lock
// is released.
func (d *HeaderFile) Edit(fn func() error) error {
	return d.Locked(true, func() error {
		if err := fn(); err != nil {
			return err
		}
		if err := d.Sync(); err != nil {
			return &SyncError{Path: d.Path, Err: err}
		}
		return nil
	})
}

// SyncError: an edited header could not be made durable.
type SyncError struct {
	Path string
	Err  error
}

func (e *SyncError) Error() string {
	return fmt.Sprintf("cannot write to device %s: %v", e.Path, e.Err)
}
func (e *SyncError) Unwrap() error { return e.Err }
