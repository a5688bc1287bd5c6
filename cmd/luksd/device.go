package main

import (
	"fmt"
	"slices"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
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
