package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// newKeyFlags name where a new passphrase comes from.
var newKeyFlags = []cli.Flag{
	&cli.StringFlag{Name: "new-keyfile", Usage: "read the new passphrase from `FILE`"},
	&cli.Int64Flag{Name: "new-keyfile-offset", Usage: "skip `BYTES` at the start of the new key file"},
	&cli.Int64Flag{Name: "new-keyfile-size", Usage: "read at most `BYTES` from the new key file"},
	&cli.IntFlag{Name: "new-key-slot", Value: -1, Usage: "put the new key in slot `NUM` (then --key-slot selects the slot to unlock)"},
}

func init() {
	register(
		&cli.Command{
			Name:      "luksAddKey",
			Usage:     "add a passphrase to a free keyslot",
			ArgsUsage: "<device> [<new key file>]",
			Flags:     flagSet(keyFlags, newKeyFlags, pbkdfFlags, typeFlags),
			Action:    luksAddKey,
		},
		&cli.Command{
			Name:      "luksRemoveKey",
			Usage:     "remove the keyslot a passphrase opens",
			ArgsUsage: "<device> [<key file>]",
			Flags:     flagSet(keyFlags, typeFlags),
			Action:    luksRemoveKey,
		},
		&cli.Command{
			Name:      "luksChangeKey",
			Usage:     "change a passphrase",
			ArgsUsage: "<device> [<new key file>]",
			Flags:     flagSet(keyFlags, newKeyFlags, pbkdfFlags, typeFlags),
			Action:    luksChangeKey,
		},
		&cli.Command{
			Name:      "erase",
			Aliases:   []string{"luksErase"},
			Usage:     "wipe every keyslot",
			ArgsUsage: "<device>",
			Flags: flagSet(typeFlags, []cli.Flag{
				&cli.StringFlag{Name: "header", Usage: "detached header `FILE`"},
			}),
			Action: erase,
		},
		&cli.Command{
			Name:      "luksKillSlot",
			Usage:     "wipe a keyslot",
			ArgsUsage: "<device> <key slot>",
			Flags:     flagSet(keyFlags, typeFlags),
			Action:    luksKillSlot,
		},
	)
}

// keyDevice returns the device argument and the optional second one.
func keyDevice(c *cli.Context) (dev, arg string, err error) {
	dev = c.Args().Get(0)
	if dev == "" {
		return "", "", requiresArgs(c, "<device>")
	}
	if c.NArg() > 2 {
		return "", "", exitf(exitParams, "Unknown argument %s.", c.Args().Get(2))
	}
	return dev, c.Args().Get(1), nil
}

// newKeySource is where a new passphrase comes from: --new-keyfile or the
// positional key file, else the terminal or standard input.
func newKeySource(c *cli.Context, positional string) keyring.Source {
	src := keyring.Source{
		KeyFile: c.String("new-keyfile"),
		Offset:  c.Int64("new-keyfile-offset"),
		Size:    c.Int64("new-keyfile-size"),
	}
	if src.KeyFile == "" {
		src.KeyFile = positional
	}
	return src
}

// checkSlot checks slot against the header: range and activity.
func checkSlot(h *luks2.Header, slot int, wantActive bool) error {
	if slot < 0 || slot >= 32 || (h.Version() == 1 && slot >= 8) {
		return exitf(exitParams, "Key slot %d is invalid.", slot)
	}
	active := slices.Contains(h.ActiveKeyslots(), slot)
	if wantActive && !active {
		return exitf(exitParams, "Keyslot %d is not active.", slot)
	}
	if !wantActive && active {
		return exitf(exitParams, "Key slot %d is full, please select another one.", slot)
	}
	return nil
}

func luksAddKey(c *cli.Context) error {
	dev, newFile, err := keyDevice(c)
	if err != nil {
		return err
	}
	p, err := pbkdfFromFlags(c)
	if err != nil {
		return err
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()

	// cryptsetup 2.6: with --new-key-slot, --key-slot picks the slot to
	// unlock; without it, --key-slot is the new slot.
	unlockSlot, newSlot := -1, c.Int("key-slot")
	if c.IsSet("new-key-slot") {
		unlockSlot, newSlot = c.Int("key-slot"), c.Int("new-key-slot")
	} else if c.IsSet("key-slot") {
		verbosef(c, "WARNING: The --key-slot parameter is used for new keyslot number.")
	}
	if newSlot >= 0 {
		if err := checkSlot(h, newSlot, false); err != nil {
			return err
		}
	}

	if len(h.ActiveKeyslots()) == 0 {
		return exitf(exitParams, "Cannot add key slot, all slots disabled and no volume key provided.")
	}
	vk, _, err := unlockWith(c, h, f, keySource(c), "Enter any existing passphrase: ", unlockSlot, false)
	if err != nil {
		return err
	}
	defer vk.Wipe()

	pass, err := readPassphrase(newKeySource(c, newFile), "Enter new passphrase for key slot: ", true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	slot, err := h.AddKey(f, vk.Bytes(), pass.Bytes(), newSlot, p)
	if err != nil {
		return headerError(headerPath(c, dev), err)
	}
	verbosef(c, "Key slot %d created.", slot)
	return syncHeader(f)
}

func luksRemoveKey(c *cli.Context) error {
	dev, keyFile, err := keyDevice(c)
	if err != nil {
		return err
	}
	if c.IsSet("key-slot") {
		return exitf(exitParams, "Option --key-slot is not allowed with luksRemoveKey action.")
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	src := keySource(c)
	if src.KeyFile == "" {
		src.KeyFile = keyFile
	}
	vk, slot, err := unlockWith(c, h, f, src, "Enter passphrase to be deleted: ", c.Int("key-slot"), false)
	if err != nil {
		return err
	}
	vk.Wipe()
	verbosef(c, "Key slot %d unlocked.", slot)
	verbosef(c, "Keyslot %d is selected for deletion.", slot)
	if len(h.ActiveKeyslots()) == 1 && src.Interactive() && !confirm(c,
		"This is the last keyslot. Device will become unusable after purging this key.") {
		return errAborted(exitPermission, "Operation aborted, the keyslot was NOT wiped.")
	}
	if err := h.KillSlot(f, slot); err != nil {
		return headerError(headerPath(c, dev), err)
	}
	verbosef(c, "Key slot %d removed.", slot)
	return syncHeader(f)
}

func luksChangeKey(c *cli.Context) error {
	dev, newFile, err := keyDevice(c)
	if err != nil {
		return err
	}
	p, err := pbkdfFromFlags(c)
	if err != nil {
		return err
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	vk, oldSlot, err := unlockWith(c, h, f, keySource(c), "Enter passphrase to be changed: ", c.Int("key-slot"), false)
	if err != nil {
		return err
	}
	verbosef(c, "Key slot %d unlocked.", oldSlot)
	defer vk.Wipe()
	pass, err := readPassphrase(newKeySource(c, newFile), "Enter new passphrase: ", true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	newSlot, err := changeKey(h, f, vk, pass, oldSlot, c.Int("new-key-slot"), p)
	if err != nil {
		return headerError(headerPath(c, dev), err)
	}
	verbosef(c, "Key slot %d created.", newSlot)
	return syncHeader(f)
}

// changeKey replaces the passphrase of oldSlot, keeping its number as
// cryptsetup does for LUKS2 (or moving it to newSlot >= 0). The new
// passphrase is written to a free keyslot before the old one is wiped, so
// an interruption never leaves the volume without a working keyslot; to
// keep the number, that costs a second key derivation.
func changeKey(h *luks2.Header, f *os.File, vk, pass *keyring.Secret, oldSlot, newSlot int, p luks2.PBKDF) (int, error) {
	tmp, err := h.AddKey(f, vk.Bytes(), pass.Bytes(), newSlot, p)
	if err != nil {
		return 0, err
	}
	if err := h.KillSlot(f, oldSlot); err != nil {
		return 0, err
	}
	if newSlot >= 0 {
		return tmp, nil
	}
	if _, err := h.AddKey(f, vk.Bytes(), pass.Bytes(), oldSlot, p); err != nil {
		// The new passphrase still opens keyslot tmp.
		return 0, fmt.Errorf("new passphrase stored in key slot %d, not %d: %w", tmp, oldSlot, err)
	}
	return oldSlot, h.KillSlot(f, tmp)
}

func luksKillSlot(c *cli.Context) error {
	dev, arg, err := keyDevice(c)
	if err != nil {
		return err
	}
	if arg == "" {
		return requiresArgs(c, "<device> <key slot>")
	}
	slot, err := strconv.Atoi(arg)
	if err != nil {
		return exitf(exitParams, "Key slot %s is invalid.", arg)
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkSlot(h, slot, true); err != nil {
		return err
	}
	verbosef(c, "Keyslot %d is selected for deletion.", slot)
	src := keySource(c)
	// Without -q (or with a key file, or input not from a terminal),
	// cryptsetup asks for a remaining passphrase: one that opens another
	// keyslot, or this one when it is the last.
	if !c.Bool("batch-mode") || c.IsSet("key-file") || !stdinIsTerminal() {
		last := len(h.ActiveKeyslots()) == 1
		if last && !c.IsSet("key-file") && !confirm(c,
			"This is the last keyslot. Device will become unusable after purging this key.") {
			return errAborted(exitPermission, "Operation aborted, the keyslot was NOT wiped.")
		}
		err := verifyRemaining(c, h, f, src, slot, last)
		// Empty standard input: cryptsetup goes ahead without a passphrase.
		if errors.Is(err, keyring.ErrNoInput) && (src.KeyFile == "" || src.KeyFile == "-") {
			err = nil
		}
		if err != nil {
			return err
		}
	}
	if err := h.KillSlot(f, slot); err != nil {
		return headerError(headerPath(c, dev), err)
	}
	verbosef(c, "Key slot %d removed.", slot)
	return syncHeader(f)
}

// verifyRemaining asks for a passphrase that opens a keyslot other than
// slot (or slot itself when it is the last).
func verifyRemaining(c *cli.Context, h *luks2.Header, f *os.File, src keyring.Source, slot int, last bool) error {
	pass, err := src.Passphrase("Enter any remaining passphrase: ", false)
	if err != nil {
		if errors.Is(err, keyring.ErrNoInput) {
			return err
		}
		return withCode(exitParams, err)
	}
	defer pass.Wipe()
	if last {
		vk, _, err := h.Unlock(f, pass.Bytes(), slot)
		clear(vk)
		if err != nil {
			return headerError(headerPath(c, ""), err)
		}
		verbosef(c, "Key slot %d unlocked.", slot)
		return nil
	}
	for _, s := range h.ActiveKeyslots() {
		if s == slot {
			continue
		}
		vk, _, err := h.Unlock(f, pass.Bytes(), s)
		clear(vk)
		if err == nil {
			verbosef(c, "Key slot %d unlocked.", s)
			return nil
		}
		if !errors.Is(err, luks2.ErrWrongPassphrase) {
			return headerError(headerPath(c, ""), err)
		}
	}
	return exitf(exitPermission, "No key available with this passphrase.")
}

// erase wipes every keyslot: the volume key is gone for good.
func erase(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if !confirm(c, fmt.Sprintf("This operation will erase all keyslots on device %s.\n"+
		"Device will become unusable after this operation.", headerPath(c, dev))) {
		return errAborted(exitPermission, "Operation aborted, keyslots were NOT wiped.")
	}
	for _, slot := range h.ActiveKeyslots() {
		if err := h.KillSlot(f, slot); err != nil {
			return headerError(headerPath(c, dev), err)
		}
		verbosef(c, "Key slot %d removed.", slot)
	}
	return syncHeader(f)
}
