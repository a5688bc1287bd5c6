package main

import (
	"github.com/urfave/cli/v2"
)

// testPassphrase is `open --test-passphrase DEVICE`: it checks that a
// passphrase (key flags as for open) unlocks a keyslot and activates
// nothing. The open verb calls it; its flags must include keyFlags.
func testPassphrase(c *cli.Context) error {
	dev := c.Args().First()
	if dev == "" {
		return requiresArgs(c, "<device>")
	}
	v, err := unlockVolume(c, dev, true)
	if err != nil {
		return err
	}
	v.Close()
	return nil
}
