package main

import (
	"errors"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// remoteFile is a remote volume (blockdev.Open of a URL) as the
// luks2.File the header verbs read and write: Sync flushes it; it is no
// file, and never grows.
type remoteFile struct{ blockdev.Device }

func (f remoteFile) Sync() error                { return f.Flush() }
func (f remoteFile) Stat() (os.FileInfo, error) { return nil, errors.ErrUnsupported }
func (f remoteFile) Truncate(int64) error       { return errors.ErrUnsupported }

// openRemote opens the volume at a URL location for the header verbs.
func openRemote(location string, write bool) (luks2.File, int64, error) {
	d, err := blockdev.Open(location, blockdev.OpenOptions{ReadOnly: !write})
	if err != nil {
		return nil, 0, locationError(location, err)
	}
	return remoteFile{d}, d.Size(), nil
}

// createRemote makes the volume luksFormat --device-size asks for: a
// store volume records its size, so it is created before its header is
// written. cryptsetup refuses --device-size with luksFormat, and luksd
// does too for a local device.
func createRemote(c *cli.Context, location string) error {
	if !c.IsSet("device-size") {
		return nil
	}
	if blockdev.Scheme(location) == "" {
		return exitf(exitParams, "Option --device-size is not allowed with luksFormat action.")
	}
	err := blockdev.Create(location, c.Int64("device-size"))
	switch {
	case errors.Is(err, os.ErrExist):
		return exitf(exitBusy, "luksd: %v (format it again without --device-size)", err)
	case errors.Is(err, blockdev.ErrNotSupported):
		return exitf(exitParams, "luksd: --device-size cannot create a volume at %s.", location)
	case err != nil:
		return locationError(location, err)
	}
	return nil
}
