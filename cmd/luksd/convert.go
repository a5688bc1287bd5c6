package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "convert",
		Usage:     "convert a LUKS header in place to --type luks1 or luks2",
		ArgsUsage: "<device>",
		Flags:     flagSet(typeFlags, []cli.Flag{headerFlag}),
		Action:    convert,
	})
}

// convert is cryptsetup 2.6.1's convert: the header (of the device, or
// --header) is rewritten as the other LUKS version, keeping its keyslots.
func convert(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	var to int
	switch c.String("type") {
	case "luks1":
		to = 1
	case "luks2":
		to = 2
	default:
		return exitf(exitParams, "Invalid LUKS type, only luks1 and luks2 are supported.")
	}
	hp := headerPath(c, dev)
	d, err := openHeaderDevice(c, hp, true)
	if err != nil {
		return err
	}
	defer d.Close()
	// --type names the version to convert to: the header is read as
	// whatever it is.
	d.LUKS2Only = false
	h, err := d.read()
	if err != nil {
		printPreface(hp, err)
		return withCode(exitParams, headerOrNotLUKS(hp, err))
	}
	if h.Version() == to {
		return exitf(exitParams, "Device is already LUKS%d type.", to)
	}
	if !confirm(c, fmt.Sprintf("This operation will convert %s to LUKS%d format.\n", hp, to)) {
		// cryptsetup's message ends with a newline of its own.
		fmt.Fprint(os.Stderr, "Operation aborted, device was NOT converted.\n\n")
		return errAborted(exitPermission, "")
	}
	return d.edit(func() error {
		_, err := h.Convert(d, d.Size, to, luks2.ConvertOptions{InUse: volumeActive})
		return convertError(hp, err)
	})
}

// headerOrNotLUKS is what convert says of a header it cannot load: a lock
// it cannot take in cryptsetup's words, anything else "not a valid LUKS
// device".
func headerOrNotLUKS(path string, err error) error {
	var lock *luks2.LockError
	if errors.As(err, &lock) {
		return lockError(err)
	}
	return exitf(exitParams, "Device %s is not a valid LUKS device.", path)
}

// convertError maps a conversion's failure to cryptsetup's message.
func convertError(path string, err error) error {
	var refused *luks2.ConvertError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		if refused.Msg == "" {
			return exitf(exitParams, "")
		}
		return exitf(exitParams, "%s", refused.Msg)
	case errors.Is(err, luks2.ErrConvertInUse):
		return exitf(exitBusy, "Cannot convert device %s which is still in use.", path)
	case errors.Is(err, luks2.ErrMoveFailed):
		return exitf(exitParams, "Unable to move keyslot area.")
	}
	return headerError(path, err)
}

// volumeActive reports whether a volume with this header is active: a
// luksd volume, or a dm-crypt mapping cryptsetup made (its device-mapper
// UUID starts CRYPT-<type>-<uuid without dashes>-, which is what
// cryptsetup's lookup_dm_dev_by_uuid looks for).
func volumeActive(uuid, typ string) bool {
	if daemon.ActiveByUUID(uuid) != "" {
		return true
	}
	prefix := "CRYPT-" + typ + "-" + strings.ReplaceAll(uuid, "-", "") + "-"
	files, _ := filepath.Glob("/sys/block/dm-*/dm/uuid")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), prefix) {
			return true
		}
	}
	return false
}
