package dmcrypt

import (
	"fmt"

	"github.com/luksd/luksd/blockdev"
)

// CanDiscard reports whether discards could be allowed on the device
// (refresh --allow-discards): it is writable and its backend discards.
func (d *Device) CanDiscard() bool { return d.trim != nil }

// SetDiscards allows or refuses discards from now on, as dm-crypt's
// allow_discards after a table reload (cryptsetup refresh). Caps reports
// the new setting; a refused discard is blockdev.ErrNotSupported, which
// a frontend that already offers discards answers as the hint it is.
func (d *Device) SetDiscards(on bool) error {
	if on && d.trim == nil {
		return fmt.Errorf("discards: %w (read-only, or the device below has none)", blockdev.ErrNotSupported)
	}
	d.discards.Store(on)
	return nil
}
