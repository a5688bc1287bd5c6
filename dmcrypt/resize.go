package dmcrypt

import (
	"errors"
	"fmt"
)

// Errors of Resize.
var (
	// ErrBeyondDevice: the size asked for reaches past the end of the
	// device below.
	ErrBeyondDevice = errors.New("the device below is too small")
	// ErrMisaligned: the size asked for is not a whole number of
	// encryption sectors.
	ErrMisaligned = errors.New("not a multiple of the sector size")
)

// Resize sets the plaintext size to size bytes (luksd resize, as dm-crypt
// takes a reloaded table's length): requests already under way finish
// against the old size, later ones see the new one. Shrinking loses
// nothing on the device below, it only hides the end; size must be a
// multiple of the sector size and fit the device below as it is now.
func (d *Device) Resize(size int64) error {
	switch {
	case len(d.parts) > 0:
		return ErrSegmentedResize
	case size <= 0 || size%d.sectorSize != 0:
		return fmt.Errorf("size %d: %w %d", size, ErrMisaligned, d.sectorSize)
	case size > d.backend.Size()-d.offset:
		return fmt.Errorf("%d bytes at %d: %w (%d bytes)", size, d.offset, ErrBeyondDevice, d.backend.Size())
	}
	d.size.Store(size)
	return nil
}
