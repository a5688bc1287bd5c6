package main

import (
	"strings"

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
	if err := checkOpenType(c.String("type"), true); err != nil {
		return err
	}
	v, err := unlockKeyslot(c, dev, true, c.Int("key-slot"), true, false)
	if err != nil {
		return err
	}
	v.Close()
	return nil
}

// keyslotType reports whether open --type t names a format with keyslots.
func keyslotType(t string) bool {
	return strings.HasPrefix(t, "luks") || t == "tcrypt" || t == "bitlk" || t == "fvault2"
}

// checkOpenType answers open --type T as cryptsetup would where luksd
// cannot follow: types it does not know (case matters, as in cryptsetup),
// and --test-passphrase of types without keyslots. Types cryptsetup opens
// and luksd does not (plain, loopaes, tcrypt, bitlk, fvault2) get one line
// saying so.
func checkOpenType(t string, testPassphrase bool) error {
	keyslots := keyslotType(t)
	switch {
	case t == "" || t == "luks" || t == "luks1" || t == "luks2" || t == "plain" && !testPassphrase:
		return nil
	case testPassphrase && !keyslots:
		return usageErrorf("Option --test-passphrase is allowed only for open of LUKS, TCRYPT, BITLK and FVAULT2 devices.")
	case t == "loopaes" || !strings.HasPrefix(t, "luks") && keyslots:
		return exitf(exitParams, "Device type %s is not supported by luksd (it opens luks, luks1, luks2 and plain).", t)
	}
	return exitf(exitParams, "Unrecognized metadata device type %s.", t)
}
