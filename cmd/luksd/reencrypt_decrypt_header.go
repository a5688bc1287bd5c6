package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// reencrypt --decrypt --header HDR DEVICE of a volume whose header HDR is
// detached already, as cryptsetup 2.6.1 runs it offline: nothing moves,
// the data is decrypted in place from its end backward
// (luks2.Header.DecryptInitDetached), and HDR is left a LUKS2 header with
// one linear segment and no keyslots.

// decryptDetachedInit marks the volume (header h on f, data on dev) for
// decryption and, unless --init-only, runs it.
func decryptDetachedInit(c *cli.Context, h *luks2.Header, f *headerDevice, dev string) error {
	params := luks2.ReencryptParams{Resilience: c.String("resilience"), Hash: c.String("resilience-hash")}
	switch params.Resilience {
	case "", "checksum", "journal", "none":
	case "datashift", "datashift-checksum", "datashift-journal":
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	default:
		fmt.Fprintf(os.Stderr, "Unsupported resilience mode %s\n", params.Resilience)
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	}
	if h.Version() != 2 {
		return exitf(exitParams, "LUKS1 decryption is not supported by luksd.")
	}
	if len(h.ActiveKeyslots()) == 0 { // decrypted already: a linear segment, no keys
		return exitf(exitParams, "No usable keyslot is available.")
	}
	data, size, err := openDevice(dev, false)
	if err != nil {
		return err
	}
	bs := dataBlockSize(data)
	data.Close()
	pass, err := readPassphrase(keySource(c), "Enter passphrase for "+dev+": ", false)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	slot := c.Int("key-slot")
	if _, _, err := h.Unlock(f, pass.Bytes(), slot); err != nil {
		return headerError(dev, err)
	}
	seg, _ := h.Segment()
	if err := checkDeviceSize(c, size-h.DataOffset(), seg.SectorSize); err != nil {
		return err
	}
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	err = f.edit(func() error {
		again, err := f.read()
		if err != nil {
			return err
		}
		return again.DecryptInitDetached(f, size, pass.Bytes(), slot, params, bs)
	})
	if errors.Is(err, luks2.ErrReencryptionInitialized) {
		return exitf(exitBusy, "LUKS2 reencryption already initialized in metadata.")
	}
	if err := initFailure(c, dev, err); err != nil || c.Bool("init-only") {
		return err
	}
	nh, err := f.read()
	if err != nil {
		return headerError(f.Path, err)
	}
	return runDecrypt(c, nh, f, dev, pass.Bytes())
}
