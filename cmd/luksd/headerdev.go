package main

import (
	"fmt"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// headerDevice is the open device (or detached header file) holding a LUKS
// header, with cryptsetup 2.6.1's metadata locks (luks2.LockHeader): the
// header is read under the shared lock and edited under the exclusive one,
// so that luksd and cryptsetup never interleave their reads and writes.
// An edit also refuses a header that changed since it was read (another
// editor got there first), so a second editor waits, then fails cleanly.
type headerDevice struct {
	File    headerFile
	path    string
	size    int64
	noLocks bool // --disable-locks
	// luks2Only: read a LUKS2 header whatever the primary's version says
	// (--type luks2, and the LUKS2-only verbs).
	luks2Only bool

	lock      *luks2.Lock // held while a read or an edit runs
	exclusive bool
}

var _ luks2.Device = (*headerDevice)(nil)

// openHeaderDevice opens path (--header or the device) for reading, and
// for writing too when write is set.
func openHeaderDevice(c *cli.Context, path string, write bool) (*headerDevice, error) {
	f, size, err := openDevice(path, write)
	if err != nil {
		return nil, err
	}
	t := c.String("type")
	// A remote volume has no flock: its backend keeps other writers out.
	noLocks := c.Bool("disable-locks") || blockdev.Scheme(path) != ""
	return &headerDevice{File: f, path: path, size: size, noLocks: noLocks,
		luks2Only: t == "luks2" || t == "LUKS2"}, nil
}

// errAmbiguous: a header copy needs repair and the device holds another
// signature, which cryptsetup will not overwrite.
var errAmbiguous = fmt.Errorf("%w: device contains ambiguous signatures", luks2.ErrNotLUKS)

// read reads the header under the shared lock. When one LUKS2 copy is not
// good, it does what cryptsetup does on load: it refuses a device that
// also holds another signature, and otherwise, with locks on and the
// device writable, reads the header again under the exclusive lock and
// rewrites the bad copy from the good one (a failed repair is no error).
func (d *headerDevice) read() (*luks2.Header, error) {
	readFn := luks2.Read
	if d.luks2Only {
		readFn = luks2.ReadLUKS2
	}
	var h *luks2.Header
	err := d.locked(false, func() error {
		var err error
		h, err = readFn(d, d.size)
		return err
	})
	if err != nil || !h.Damaged() {
		return h, err
	}
	if luks2.ForeignSignature(d) != "" {
		return nil, errAmbiguous
	}
	if d.noLocks {
		return h, nil
	}
	rw, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if err != nil {
		return h, nil
	}
	defer rw.Close()
	w := &headerDevice{File: rw, path: d.path, size: d.size}
	err = w.locked(true, func() error {
		again, err := readFn(w, w.size)
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
func (d *headerDevice) Flush() error { return d.File.Sync() }

// WriteAt writes to the device.
func (d *headerDevice) WriteAt(p []byte, off int64) (int, error) { return d.File.WriteAt(p, off) }

// Close closes the device.
func (d *headerDevice) Close() error { return d.File.Close() }

// ReadAt reads under the shared lock unless a lock is held already: a
// keyslot's area, read between reading the header and editing it, is never
// read while another process rewrites it.
func (d *headerDevice) ReadAt(p []byte, off int64) (int, error) {
	if d.lock != nil || d.noLocks {
		return d.File.ReadAt(p, off)
	}
	var n int
	err := d.locked(false, func() error {
		var err error
		n, err = d.File.ReadAt(p, off)
		return err
	})
	return n, err
}

// locked runs fn holding the shared or the exclusive lock; a lock already
// held (an exclusive one, or the shared one for a reader) is used as it is.
func (d *headerDevice) locked(exclusive bool, fn func() error) error {
	if d.noLocks || d.lock != nil && (d.exclusive || !exclusive) {
		return fn()
	}
	if d.lock != nil {
		// A reader turning editor: cryptsetup drops its read lock first.
		d.lock.Unlock()
		d.lock = nil
	}
	l, err := luks2.LockHeader(d.path, exclusive)
	if err != nil {
		if exclusive {
			return exitf(exitParams, "Failed to acquire write lock on device %s.", d.path)
		}
		return exitf(exitBusy, "Failed to acquire read lock on device %s.", d.path)
	}
	d.lock, d.exclusive = l, exclusive
	defer func() {
		d.lock.Unlock()
		d.lock, d.exclusive = nil, false
	}()
	return fn()
}

// edit runs fn, an edit of the header, under the exclusive lock and makes
// what it wrote durable before the lock is released.
func (d *headerDevice) edit(fn func() error) error {
	return d.locked(true, func() error {
		if err := fn(); err != nil {
			return err
		}
		return syncHeader(d)
	})
}

// syncHeader makes a header update durable.
func syncHeader(d *headerDevice) error {
	if err := d.File.Sync(); err != nil {
		return exitf(exitDevice, "Cannot write to device %s: %v", d.path, err)
	}
	return nil
}
