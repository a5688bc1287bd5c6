package main

import (
	"fmt"
	"os"
)

// reencrypt --reduce-device-size SIZE on a LUKS2 volume, as cryptsetup
// 2.6.1 runs it offline: the data moves SIZE bytes toward the device's
// end as it is rewritten to the new volume key, and its last SIZE bytes
// are given up (luks2.ReencryptParams.Shift). The daemon cannot move
// the data under its clients: reencryptOnline refuses an open volume.
// With --header luksd refuses it, as any reencryption of a LUKS2 volume
// (cryptsetup runs it).

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
