package frontend

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/luksd/luksd/blockdev"
)

// DiscardSwitch is an Attachment whose kernel device can start or stop
// taking discards while attached (cryptsetup refresh [--allow-discards]).
// The nbd frontend is one: /dev/nbdN is connected offering discards
// whenever the volume could take them, and its queue's discard_max_bytes
// (0, or the driver's maximum) says whether the kernel sends them, which
// is what fstrim, a file system and a mapping over it see. ublk is not:
// Linux 6.12 takes a ublk device's parameters only before it starts.
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

// SetDiscards lets /dev/nbdN send discards, or stops it. Discards the
// kernel still sends meanwhile are refused by the crypt layer, which the
// server answers as the hint a discard is.
func (n *nbdAttachment) SetDiscards(on bool) error {
	if !n.trimOffered {
		return errors.New("the kernel device was attached without discards (read-only, or the data device has none)")
	}
	q := fmt.Sprintf("/sys/block/nbd%d/queue/", n.a.Index())
	var limit uint64
	if on {
		// The driver's maximum, in whole discard granules (the kernel
		// takes nothing else; nbd's maximum is not a multiple of 4096).
		hw, err := readSysfsUint(q + "discard_max_hw_bytes")
		if err != nil {
			return err
		}
		gran, err := readSysfsUint(q + "discard_granularity")
		if err != nil {
			return err
		}
		limit = hw
		if gran > 0 {
			limit -= hw % gran
		}
	}
	if err := os.WriteFile(q+"discard_max_bytes", []byte(strconv.FormatUint(limit, 10)), 0); err != nil {
		return fmt.Errorf("setting discards of %s: %v", n.a.DevicePath(), err)
	}
	return nil
}

func readSysfsUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
