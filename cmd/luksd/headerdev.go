package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// headerDevice is the device (or detached header file) whose header a
// verb reads and edits under cryptsetup's metadata locks
// (luks2.HeaderFile), with lock and sync failures in cryptsetup's words.
type headerDevice struct{ *luks2.HeaderFile }

// openHeaderDevice opens path (--header or the device) for reading, and
// for writing too when write is set.
func openHeaderDevice(c *cli.Context, path string, write bool) (*headerDevice, error) {
	f, size, err := openDevice(path, write)
	if err != nil {
		return nil, err
	}
	t := c.String("type")
	return &headerDevice{&luks2.HeaderFile{File: f, Path: path, Size: size, NoLocks: c.Bool("disable-locks"),
		LockName: remoteLockName(path), LUKS2Only: t == "luks2" || t == "LUKS2"}}, nil
}

// remoteLockName names the metadata lock of a remote volume at location
// (luks2.LockNamed), "" for a local path: the header verbs and the
// daemons of this host that edit one volume take turns under it, as
// cryptsetup's take turns on a block device. One name per location,
// whatever its trailing slash.
func remoteLockName(location string) string {
	if blockdev.Scheme(location) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(location, "/")))
	return "L_luksd-" + hex.EncodeToString(sum[:16])
}

// read reads the header, repairing a damaged copy as cryptsetup does.
func (d *headerDevice) read() (*luks2.Header, error) {
	h, err := d.Read()
	return h, lockError(err)
}

// locked runs fn under the shared or the exclusive lock.
func (d *headerDevice) locked(exclusive bool, fn func() error) error {
	return lockError(d.Locked(exclusive, fn))
}

// edit runs fn, an edit of the header, under the exclusive lock and makes
// what it wrote durable before the lock is released. The refusal of a
// served S3 volume is checked under that lock too, so the header it
// reads is the one fn reads next from the same refreshed cache.
func (d *headerDevice) edit(fn func() error) error {
	return lockError(d.Edit(func() error {
		if err := refuseServedSharedChunk(d); err != nil {
			return err
		}
		return fn()
	}))
}

// lockError maps a header device's lock and sync failures to cryptsetup's
// messages; other errors pass as they are.
func lockError(err error) error {
	var lock *luks2.LockError
	var sync *luks2.SyncError
	switch {
	case errors.As(err, &lock) && lock.Exclusive:
		return exitf(exitParams, "Failed to acquire write lock on device %s.", lock.Path)
	case errors.As(err, &lock):
		return exitf(exitBusy, "Failed to acquire read lock on device %s.", lock.Path)
	case errors.As(err, &sync):
		return exitf(exitDevice, "Cannot write to device %s: %v", sync.Path, sync.Err)
	}
	return err
}
