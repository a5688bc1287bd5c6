package main

import (
	"cmp"
	"os"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "resize",
		Usage:     "grow or shrink an active volume: to the end of its device, or to --device-size/--size",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "device-size", Usage: "new size in `BYTES` (units as cryptsetup's)"},
			&cli.Uint64Flag{Name: "size", Aliases: []string{"b"}, Usage: "new size in 512-byte `SECTORS`"},
		},
		Action: resizeAction,
	})
}

// resizeAction is cryptsetup resize NAME: the daemon takes the new size
// (without one, what its data device now holds past the data offset) and
// tells the kernel device and the /dev/mapper mapping. No key is asked
// for: cryptsetup asks only when the active volume key lives in the
// kernel keyring, and a luksd daemon holds its key itself.
func resizeAction(c *cli.Context) error {
	arg, name, ok, err := volumeArg(c)
	if err != nil {
		return err
	}
	if !ok || !daemon.Alive(name) {
		return exitf(exitDevice, "Device %s is not active.", arg)
	}
	if st, err := daemon.Active(name); err == nil && st != nil && staticSize(st) {
		// cryptsetup 2.7 and later; 2.6.1 has a FIXME here and resizes.
		return exitf(exitParams, "Can not resize LUKS2 device with static size.")
	}
	return daemon.Resize(name, lineSize(c))
}

// lineSize is the size --device-size (bytes) or --size (512-byte sectors)
// asks for, 0 when neither is given (verifyLine refuses both at once).
func lineSize(c *cli.Context) int64 {
	switch {
	case c.IsSet("device-size"):
		return int64(c.Uint64("device-size"))
	case c.IsSet("size"):
		return int64(c.Uint64("size")) * 512
	}
	return 0
}

// staticSize reports whether the active volume st is LUKS2 with a data
// segment of fixed size in its header (not "dynamic").
func staticSize(st *daemon.State) bool {
	if st.Type != "LUKS2" {
		return false
	}
	f, err := os.Open(cmp.Or(st.Header, st.Image))
	if err != nil {
		return false // a remote location: its header is read by open only
	}
	defer f.Close()
	h, err := luks2.Read(f, 0)
	if err != nil {
		return false
	}
	seg, err := h.Segment()
	return err == nil && seg.Size != 0
}
