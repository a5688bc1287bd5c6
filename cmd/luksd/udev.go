package main

import (
	"fmt"

	"github.com/luksd/luksd/daemon"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "udev-name",
		Hidden:    true,
		Usage:     "for udev rules (contrib/udev/60-luksd.rules): the luksd volume on a block device",
		ArgsUsage: "KERNEL-NAME",
		Action:    udevNameAction,
	})
}

// udevNameAction prints, for udev's IMPORT{program}, LUKSD_NAME and
// LUKSD_MAPPING of the active volume whose block device is the argument
// (nbd0, ublkb1); nothing when there is none.
func udevNameAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return exitf(exitParams, "Command requires a block device name as argument.")
	}
	name, mapping := daemon.VolumeOnDevice(c.Args().First())
	if name != "" {
		fmt.Printf("LUKSD_NAME=%s\nLUKSD_MAPPING=%s\n", name, mapping)
	}
	return nil
}
