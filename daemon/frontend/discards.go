package frontend

import (
	"errors"

	"github.com/luksd/luksd/blockdev"
)

// DiscardSwitch is an Attachment whose kernel device lets the volume
// start or stop taking discards while attached (cryptsetup refresh
// [--allow-discards]). The nbd frontend is one: /dev/nbdN is connected
// offering discards whenever the volume could take them, since nbd.ko
// fixes its flags at connect and a queue's discard limit, once set to 0,
// cannot be raised again (6.12 then reports a discard granularity of 0);
// while discards are refused the crypt layer drops the discards the
// kernel sends, which the server answers as the hints they are. ublk is
// not one: Linux 6.12 takes a ublk device's parameters only before it
// starts.
type DiscardSwitch interface {
	SetDiscards(on bool) error
}

// discardable is a device whose discards can be allowed and refused
// while it is served (the crypt layer).
type discardable interface {
	CanDiscard() bool
}

// switchableDiscards reports whether dev could take discards, so that
// the kernel device is made able to send them.
func switchableDiscards(dev blockdev.Device, opts Options) bool {
	d, ok := dev.(discardable)
	return ok && d.CanDiscard() && !opts.ReadOnly
}

// SetDiscards has nothing to change on /dev/nbdN, which sends discards
// whenever the volume could take them: the crypt layer decides.
func (n *nbdAttachment) SetDiscards(on bool) error {
	if on && !n.trimOffered {
		return errors.New("the kernel device was attached without discards (read-only, or the data device has none)")
	}
	return nil
}
