package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"golang.org/x/sys/unix"
)

// openCryptDevice opens the data device of an unlocked volume and puts the
// crypt layer over it. allowDiscards adds to the header's persistent
// "allow-discards" flag. The returned device owns its own copy of the key
// schedule: the caller may Close v right away.
func openCryptDevice(v *volume, readOnly, allowDiscards bool) (*dmcrypt.Device, error) {
	seg := v.Segment
	c, err := dmcrypt.New(seg.Cipher, v.Key.Bytes())
	if err != nil {
		return nil, withCode(exitParams, fmt.Errorf("cipher %s: %w", seg.Cipher, err))
	}
	backend, err := blockdev.OpenFile(v.Path, readOnly)
	if err != nil {
		c.Wipe()
		return nil, exitf(exitDevice, "Device %s does not exist or access denied.", v.Path)
	}
	discards := allowDiscards || slices.Contains(v.Header.Flags(), "allow-discards")
	d, err := dmcrypt.NewDevice(backend, c, dmcrypt.DeviceOptions{
		Offset:        seg.Offset,
		Size:          seg.Size,
		SectorSize:    seg.SectorSize,
		AllowDiscards: discards,
		ReadOnly:      readOnly,
	})
	if err != nil {
		c.Wipe()
		backend.Close()
		return nil, exitf(exitDevice, "Device %s: %v.", v.Path, err)
	}
	return d, nil
}

// claimExclusive makes sure nothing else uses path before luksFormat
// overwrites it: a block device is reopened with O_EXCL, which the kernel
// refuses while it is mounted, swapped on or held by dm/md (the returned
// file keeps the claim; the caller closes it); an image file must not be
// the image of an active luksd volume. The errors are cryptsetup's: its
// blkid probe fails first on a mounted or mapped device (exit 1), its own
// exclusive open on one held otherwise (exit 5).
func claimExclusive(path string) (*os.File, error) {
	inUse := exitf(exitBusy, "Cannot use device %s which is in use (already mapped or mounted).", path)
	if activeUserOf(path) != "" {
		return nil, inUse
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, nil
	}
	if deviceInUse(path) {
		return nil, exitf(exitParams, "Cannot exclusively open %s, device in use.", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return nil, inUse
	}
	return f, nil
}
