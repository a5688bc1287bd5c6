package main

import (
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// reencrypt --reduce-device-size SIZE on a LUKS2 volume, as cryptsetup
// 2.6.1 runs it offline: the data moves SIZE bytes toward the device's
// end as it is rewritten to the new volume key, and its last SIZE bytes
// are given up (luks2.ReencryptParams.Shift). The daemon cannot move
// the data under its clients: reencryptOnline refuses an open volume.
// With --header HDR the data moves on the data device alone and HDR's
// data offset grows by SIZE (reencryptShiftDetached).

// checkShift refuses, as cryptsetup does before it marks the volume, a
// data shift that is not a multiple of sectorSize (the larger of the old
// and new sector sizes).
func checkShift(shift int64, sectorSize int) error {
	if shift <= 0 || sectorSize <= 0 || shift%int64(sectorSize) == 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "Data shift value is not aligned to encryption sector size (%d bytes).\n", sectorSize)
	return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
}

// reencryptShiftDetached marks the volume on dev whose detached header
// hp (h, on f) is not marked yet for a reencryption with a data shift
// and, unless --init-only, runs it, as cryptsetup 2.6.1 does: the
// metadata is the same as with the header on the device, and at the end
// the keyslots area grows up to the new data offset as there.
//
// cryptsetup marks the volume too when the new data offset falls inside
// the header's keyslots area, rewrites all but the first hotzone, then
// fails ("Failed to write reencryption resilience metadata.") and can
// neither finish nor open it: luksd refuses that before anything is
// written.
func reencryptShiftDetached(c *cli.Context, h *luks2.Header, f *headerDevice, dev, hp string) error {
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := checkReencryptMode(c, h, dev); err != nil {
		return err
	}
	if off := h.DataOffset() + c.Int64("reduce-device-size"); off < h.HeaderSize() {
		return exitf(exitParams, "Data shift to offset %d falls inside the header's keyslots area of %s (up to %d bytes): cryptsetup 2.6.1 fails at the end of such a run. Use --reduce-device-size of at least %d.",
			off, hp, h.HeaderSize(), h.HeaderSize()-h.DataOffset())
	}
	df, size, err := openDevice(dev, true)
	if err != nil {
		return err
	}
	defer df.Close()
	pass, err := reencryptInit(c, h, f, df, size)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	if c.Bool("init-only") {
		return nil
	}
	if h, err = f.read(); err != nil {
		return headerError(hp, err)
	}
	return runReencrypt(c, h, f, hp, pass.Bytes(), syncedFile{df}, size)
}
