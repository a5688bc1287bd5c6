package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
	"golang.org/x/sys/unix"
)

// openCryptDevice opens and claims the data device of an unlocked volume
// and puts the crypt layer over it. The claim (blockdev.Open's Exclusive:
// O_EXCL on a block device, an OFD lock on an image) lasts until the
// device is closed; a device in use is refused with cryptsetup's message
// and exit code 5. allowDiscards adds to the header's persistent
// "allow-discards" flag. The returned device owns its own copy of the key
// schedule, locked in memory when the memory-lock limit allows it
// (keysLocked): the caller may Close v right away.
func openCryptDevice(v *volume, readOnly, allowDiscards bool) (d *dmcrypt.Device, keysLocked bool, err error) {
	seg := v.Segment
	c, err := dmcrypt.New(seg.Cipher, v.Key.Bytes())
	if err != nil {
		return nil, false, withCode(exitParams, fmt.Errorf("cipher %s: %w", seg.Cipher, err))
	}
	_, lerr := keyring.LockReachable(c)
	backend, err := blockdev.Open(v.Path, blockdev.OpenOptions{ReadOnly: readOnly, Exclusive: true})
	if err != nil {
		c.Wipe()
		if errors.Is(err, blockdev.ErrInUse) {
			return nil, false, inUse(v.Path, err)
		}
		return nil, false, exitf(exitDevice, "Device %s does not exist or access denied.", v.Path)
	}
	discards := allowDiscards || slices.Contains(v.Header.Flags(), "allow-discards")
	d, err = dmcrypt.NewDevice(backend, c, dmcrypt.DeviceOptions{
		Offset:        seg.Offset,
		Size:          seg.Size,
		SectorSize:    seg.SectorSize,
		AllowDiscards: discards,
		ReadOnly:      readOnly,
	})
	if err != nil {
		c.Wipe()
		backend.Close()
		return nil, false, exitf(exitDevice, "Device %s: %v.", v.Path, err)
	}
	return d, lerr == nil, nil
}

// checkNotInUse refuses, before the passphrase is asked, a data device
// that openCryptDevice could not claim.
func checkNotInUse(path string, readOnly bool) error {
	f, err := blockdev.Open(path, blockdev.OpenOptions{ReadOnly: readOnly, Exclusive: true})
	if err == nil {
		return f.Close()
	}
	if errors.Is(err, blockdev.ErrInUse) {
		return inUse(path, err)
	}
	return nil // reading the header reports it
}

// inUseError is cryptsetup's refusal of a device in use; its cause (a
// blockdev.ClaimError) says what holds the device, for the daemon's log.
type inUseError struct {
	path  string
	cause error
}

func (e *inUseError) Error() string {
	return fmt.Sprintf("Cannot use device %s which is in use (already mapped or mounted).", e.path)
}

func (e *inUseError) Unwrap() error { return e.cause }

func inUse(path string, cause error) error {
	return &exitError{code: exitBusy, err: &inUseError{path: path, cause: cause}}
}

// claimExclusive makes sure nothing else uses path before luksFormat
// overwrites it: a block device is reopened with O_EXCL, which the kernel
// refuses while it is mounted, swapped on or held by dm/md (the returned
// file keeps the claim; the caller closes it); an image file must not be
// the image of an active luksd volume. The errors are cryptsetup's: its
// blkid probe fails first on a mounted or mapped device (exit 1), its own
// exclusive open on one held otherwise (exit 5).
func claimExclusive(path string) (*os.File, error) {
	if activeUserOf(path) != "" {
		return nil, inUse(path, nil)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		// An image file another luksd (or qemu) has claimed, or one a
		// loop device is attached to.
		return nil, checkNotInUse(path, false)
	}
	if deviceInUse(path) {
		return nil, exitf(exitParams, "Cannot exclusively open %s, device in use.", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return nil, inUse(path, err)
	}
	return f, nil
}
