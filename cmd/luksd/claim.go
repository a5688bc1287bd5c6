package main

import (
	"errors"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"golang.org/x/sys/unix"
)

// checkNotInUse refuses, before the passphrase is asked, a data device
// that the daemon could not claim.
func checkNotInUse(path string, readOnly bool) error {
	f, err := blockdev.Open(path, blockdev.OpenOptions{ReadOnly: readOnly, Exclusive: true})
	if err == nil {
		return f.Close()
	}
	if errors.Is(err, blockdev.ErrInUse) {
		return daemon.InUse(path, err)
	}
	return nil // reading the header reports it
}

// claimExclusive makes sure nothing else uses path before luksFormat
// overwrites it: a block device is reopened with O_EXCL, which the kernel
// refuses while it is mounted, swapped on or held by dm/md (the returned
// file keeps the claim; the caller closes it); an image file must not be
// the image of an active luksd volume. The errors are cryptsetup's: its
// blkid probe fails first on a mounted or mapped device (exit 1), its own
// exclusive open on one held otherwise (exit 5).
func claimExclusive(path string) (*os.File, error) {
	if daemon.UserOf(path) != "" {
		return nil, daemon.InUse(path, nil)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		// An image file another luksd (or qemu) has claimed, or one a
		// loop device is attached to.
		return nil, checkNotInUse(path, false)
	}
	if blockdev.Busy(path) {
		return nil, exitf(exitParams, "Cannot exclusively open %s, device in use.", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return nil, daemon.InUse(path, err)
	}
	return f, nil
}
