package main

import (
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "luksConvertKey",
		Usage:     "rewrap a LUKS2 keyslot's key with new PBKDF parameters",
		ArgsUsage: "<device> [<key file>]",
		Flags:     flagSet(keyFlags, pbkdfFlags, typeFlags),
		Action:    luksConvertKey,
	})
}

// luksConvertKey is cryptsetup 2.6.1's: the keyslot -S names (or, without
// it, the one the passphrase opens) gets the PBKDF the flags ask for.
// cryptsetup 2.6.1 reads the passphrase from --key-file or the terminal
// only; the <key file> its usage line names is not read.
func luksConvertKey(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	p, err := pbkdfFromFlags(c)
	if err != nil {
		return err
	}
	hp := headerPath(c, dev)
	h, f, err := readLUKS2Header(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkPBKDF(2, p); err != nil {
		return err
	}
	slot := c.Int("key-slot")
	status := h.KeyslotStatus(slot)
	if status == luks2.KeyslotInactive {
		return exitf(exitParams, "Keyslot %d is not active.", slot)
	}
	pass, err := readPassphrase(keySource(c), "Enter passphrase for keyslot to be converted: ", false)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	if slot >= 0 && !status.InUse() {
		return exitf(exitParams, "No usable keyslot is available.")
	}
	key, opened, err := h.Unlock(f, pass.Bytes(), slot)
	if err != nil {
		return headerError(hp, err)
	}
	defer clear(key)
	err = f.edit(func() error {
		return headerErrorOrNil(hp, h.ConvertKey(f, opened, key, pass.Bytes(), p, slot >= 0))
	})
	if err != nil {
		return err
	}
	verbosef(c, "Key slot %d created.", opened)
	return nil
}
