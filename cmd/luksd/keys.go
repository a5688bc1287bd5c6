package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

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

// addKeyFlags are luksAddKey's ways to add a key without unlocking one.
var addKeyFlags = []cli.Flag{
	&cli.StringFlag{Name: "volume-key-file", Usage: "take the volume key from `FILE` instead of an existing passphrase"},
	&cli.BoolFlag{Name: "unbound", Usage: "add a new random key bound to no segment (LUKS2; needs --key-size)"},
	&cli.IntFlag{Name: "key-size", Aliases: []string{"s"}, Usage: "key size in `BITS` (--unbound, or --volume-key-file without keyslots)"},
}

func init() {
	register(
		&cli.Command{
			Name:      "luksAddKey",
			Usage:     "add a passphrase to a free keyslot",
			ArgsUsage: "<device> [<new key file>]",
			Flags:     flagSet(keyFlags, newKeyFlags, pbkdfFlags, typeFlags, addKeyFlags, tokenFlags),
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
				headerFlag,
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
	// Further arguments are ignored, as by cryptsetup.
	return dev, c.Args().Get(1), nil
}

// newKeyArgs returns the device, the optional new key file and the PBKDF
// the flags ask for (luksAddKey, luksChangeKey).
func newKeyArgs(c *cli.Context) (dev, newFile string, p luks2.PBKDF, err error) {
	if dev, newFile, err = keyDevice(c); err != nil {
		return "", "", p, err
	}
	p, err = pbkdfFromFlags(c)
	return dev, newFile, p, err
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
	status := h.KeyslotStatus(slot)
	if status == luks2.KeyslotInvalid {
		if !wantActive {
			return exitf(exitParams, "Key slot %d is invalid, please select between 0 and %d.", slot, luks2.MaxKeyslots(h.Version())-1)
		}
		return exitf(exitParams, "Key slot %d is invalid.", slot)
	}
	active := status.InUse()
	if wantActive && !active {
		return exitf(exitParams, "Keyslot %d is not active.", slot)
	}
	if !wantActive && active {
		return exitf(exitParams, "Key slot %d is full, please select another one.", slot)
	}
	return nil
}

// checkPBKDF refuses PBKDF settings a header of LUKS version cannot take,
// with cryptsetup's messages, before any passphrase is asked for.
func checkPBKDF(version int, p luks2.PBKDF) error {
	if err := checkKeyslotCipher(version, p); err != nil {
		return err
	}
	if p.Hash != "" && !luks2.HashSupported(p.Hash) {
		// cryptsetup 2.6.1 checks the hash first, for LUKS1 and argon2 too.
		fmt.Fprintf(os.Stderr, "Requested hash %s is not supported.\n", p.Hash)
		return exitf(exitParams, "Failed to set pbkdf parameters.")
	}
	err := luks2.CheckPBKDF(p, version)
	var limit *luks2.PBKDFLimitError
	switch {
	case errors.Is(err, luks2.ErrLUKS1PBKDF):
		return exitf(exitParams, "Requested PBKDF type is not supported for LUKS1.")
	case errors.As(err, &limit):
		return exitf(exitParams, "%s", sentence(limit))
	}
	return withCode(exitParams, err)
}

// checkKeyslotCipher refuses --keyslot-cipher where cryptsetup does: on
// LUKS1, and a cipher that cannot encrypt keyslot areas.
func checkKeyslotCipher(version int, p luks2.PBKDF) error {
	switch {
	case p.AreaCipher == "":
		return nil
	case version != 2:
		return exitf(exitParams, "Keyslot encryption parameters can be set only for LUKS2 device.")
	case luks2.CheckKeyslotCipher(p.AreaCipher, p.AreaKeySize) != nil:
		return exitf(exitParams, "Cannot use %s cipher for keyslot encryption.", p.AreaCipher)
	}
	return nil
}

// sentence is a luks2 error that carries cryptsetup's message as
// cryptsetup prints it: with a capital and a full stop.
func sentence(err error) string {
	msg := err.Error()
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

func luksAddKey(c *cli.Context) error {
	dev, newFile, p, err := newKeyArgs(c)
	if err != nil {
		return err
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if c.Bool("unbound") && h.Version() != 2 {
		return exitf(exitParams, "Device %s is not a valid LUKS2 device.", headerPath(c, dev))
	}
	if err := checkPBKDF(h.Version(), p); err != nil {
		return err
	}

	// cryptsetup 2.6: with --new-key-slot, --key-slot picks the slot to
	// unlock; without it, --key-slot is the new slot.
	unlockSlot, newSlot := -1, c.Int("key-slot")
	if c.IsSet("new-key-slot") {
		unlockSlot, newSlot = c.Int("key-slot"), c.Int("new-key-slot")
	} else if c.IsSet("key-slot") && !c.Bool("unbound") {
		verbosef(c, "WARNING: The --key-slot parameter is used for new keyslot number.")
	}
	if newSlot >= 0 {
		if err := checkSlot(h, newSlot, false); err != nil {
			return err
		}
	}

	vk, err := keyToAdd(c, h, f, unlockSlot)
	if err != nil {
		return err
	}
	defer vk.Wipe()

	pass, err := readPassphrase(newKeySource(c, newFile), "Enter new passphrase for key slot: ", true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	var slot int
	err = f.edit(func() error {
		var err error
		if c.Bool("unbound") {
			slot, err = h.AddUnboundKey(f, vk.Bytes(), pass.Bytes(), newSlot, p)
		} else {
			slot, err = h.AddKey(f, vk.Bytes(), pass.Bytes(), newSlot, p)
		}
		return headerErrorOrNil(headerPath(c, dev), err)
	})
	if err != nil {
		return err
	}
	verbosef(c, "Key slot %d created.", slot)
	return nil
}

// keyToAdd returns the key luksAddKey stores: a new random one with
// --unbound, the checked content of --volume-key-file, or the volume key an
// existing passphrase unlocks.
func keyToAdd(c *cli.Context, h *luks2.Header, f io.ReaderAt, unlockSlot int) (*keyring.Secret, error) {
	bits := c.Int("key-size")
	if c.Bool("unbound") {
		if path := c.String("volume-key-file"); path != "" {
			// cryptsetup: the unbound key is the file's, as it is.
			vk, err := keyring.ReadKeyFile(path, bits/8)
			return vk, keyError(err)
		}
		k, err := keyring.Random(bits / 8)
		return k, keyError(err)
	}
	if path := c.String("volume-key-file"); path != "" {
		n := 0
		if seg, err := h.Segment(); err == nil {
			n = seg.KeySize
		}
		// cryptsetup: LUKS2 takes --key-size over the keyslots' key size.
		if bits > 0 && h.Version() == 2 {
			n = bits / 8
		}
		if n == 0 {
			return nil, exitf(exitParams, "Cannot determine volume key size for LUKS without keyslots, please use --key-size option.")
		}
		vk, err := keyring.ReadKeyFile(path, n)
		if err != nil {
			return nil, keyError(err)
		}
		if err := h.VerifyVolumeKey(vk.Bytes()); err != nil {
			vk.Wipe()
			return nil, headerError(headerPath(c, ""), err)
		}
		return vk, nil
	}
	if len(h.BoundKeyslots()) == 0 {
		return nil, exitf(exitParams, "Cannot add key slot, all slots disabled and no volume key provided.")
	}
	var vk *keyring.Secret
	var slot int
	var err error
	if tokensAsked(c) {
		// cryptsetup's luksAddKey unlocks by token when asked to, and
		// then only so.
		vk, slot, err = unlockByToken(c, h, f, false)
	} else {
		vk, slot, err = unlockWith(c, h, f, keySource(c), "Enter any existing passphrase: ", unlockSlot, false)
	}
	if err == nil && h.Unbound(slot) {
		// cryptsetup fails here (exit 1) without a word.
		vk.Wipe()
		return nil, exitf(exitParams, "Key slot %d holds an unbound key, not the volume key.", slot)
	}
	return vk, err
}

// keyError gives a key source's failure cryptsetup's exit code: 3 for
// memory, 1 for the rest (their messages are cryptsetup's).
func keyError(err error) error {
	if errors.Is(err, keyring.ErrNoMemory) {
		return withCode(exitMemory, err)
	}
	return withCode(exitParams, err)
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
	if h.KeyslotStatus(slot) == luks2.KeyslotActiveLast && src.Interactive() && !confirmLast(c) {
		return errLastKept
	}
	return killSlot(c, dev, h, f, slot)
}

// confirmLast asks before the last keyslot is wiped.
func confirmLast(c *cli.Context) bool {
	return confirm(c, "This is the last keyslot. Device will become unusable after purging this key.")
}

// errLastKept is the answer to a declined confirmLast.
var errLastKept = errAborted(exitPermission, "Operation aborted, the keyslot was NOT wiped.")

// killSlot wipes keyslot slot of dev's header h and says so with -v.
func killSlot(c *cli.Context, dev string, h *luks2.Header, f *headerDevice, slot int) error {
	if err := f.edit(func() error { return headerErrorOrNil(headerPath(c, dev), h.KillSlot(f, slot)) }); err != nil {
		return err
	}
	verbosef(c, "Key slot %d removed.", slot)
	return nil
}

func luksChangeKey(c *cli.Context) error {
	dev, newFile, p, err := newKeyArgs(c)
	if err != nil {
		return err
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkPBKDF(h.Version(), p); err != nil {
		return err
	}
	vk, oldSlot, err := unlockWith(c, h, f, keySource(c), "Enter passphrase to be changed: ", c.Int("key-slot"), false)
	if err != nil {
		return err
	}
	defer vk.Wipe()
	// cryptsetup checks the passphrase by activating with it, which a
	// volume it is reencrypting refuses silently, and one with unknown
	// requirements with its words, before it asks for the new one.
	if err := h.Requirements(); errors.Is(err, luks2.ErrReencryption) {
		return exitf(exitParams, "")
	} else if errors.Is(err, luks2.ErrUnmetRequirements) {
		return headerError(headerPath(c, dev), err)
	}
	verbosef(c, "Key slot %d unlocked.", oldSlot)
	pass, err := readPassphrase(newKeySource(c, newFile), "Enter new passphrase: ", true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	newSlot := oldSlot
	err = f.edit(func() error {
		var err error
		switch {
		case h.Version() == 1 && !c.IsSet("key-slot") && c.Int("new-key-slot") < 0:
			newSlot, err = h.MoveKey(f, vk.Bytes(), pass.Bytes(), oldSlot, p)
		case h.Version() == 2 && c.Int("new-key-slot") < 0 && c.IsSet("key-slot"):
			// As cryptsetup, the keyslot is rewritten in its own area; it
			// keeps its number, metadata place, priority and tokens.
			err = h.ConvertKey(f, oldSlot, vk.Bytes(), pass.Bytes(), p, true)
		case h.Version() == 2 && c.Int("new-key-slot") < 0:
			// As cryptsetup, the key material moves to the first free area
			// while a keyslot number is free.
			err = h.ChangeKey(f, oldSlot, vk.Bytes(), pass.Bytes(), p)
		default:
			newSlot, err = h.ReplaceKey(f, vk.Bytes(), pass.Bytes(), oldSlot, c.Int("new-key-slot"), p)
		}
		return headerErrorOrNil(headerPath(c, dev), err)
	})
	if err != nil {
		return err
	}
	verbosef(c, "Key slot %d created.", newSlot)
	return nil
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
		last := h.KeyslotStatus(slot) == luks2.KeyslotActiveLast
		if last && !c.IsSet("key-file") && !confirmLast(c) {
			return errLastKept
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
	return killSlot(c, dev, h, f, slot)
}

// verifyRemaining asks for a passphrase that opens a bound keyslot other
// than slot (or slot itself when it is the last).
func verifyRemaining(c *cli.Context, h *luks2.Header, f io.ReaderAt, src keyring.Source, slot int, last bool) error {
	pass, err := src.Passphrase("Enter any remaining passphrase: ", false)
	if err != nil {
		if errors.Is(err, keyring.ErrNoInput) {
			return err
		}
		return withCode(exitParams, err)
	}
	defer pass.Wipe()
	if errors.Is(h.Requirements(), luks2.ErrReencryption) {
		// cryptsetup verifies by activating through one keyslot, which
		// cannot hold both keys of a reencryption.
		return exitf(exitPermission, "No key available with this passphrase.")
	}
	if last {
		vk, _, err := h.Unlock(f, pass.Bytes(), slot)
		clear(vk)
		if err != nil {
			return headerError(headerPath(c, ""), err)
		}
		verbosef(c, "Key slot %d unlocked.", slot)
		return nil
	}
	// The keyslots holding the volume key, unbound ones not counted.
	others := slices.DeleteFunc(h.BoundKeyslots(), func(s int) bool { return s == slot })
	if len(others) == 0 {
		// Killing an unbound keyslot where no bound one is left: cryptsetup
		// 2.6.1 has nothing to check the passphrase against, goes ahead and
		// names the end of its keyslot loop.
		verbosef(c, "Key slot %d unlocked.", luks2.MaxKeyslots(h.Version()))
		return nil
	}
	for _, s := range others {
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
	return f.edit(func() error {
		for _, slot := range h.ActiveKeyslots() {
			// As cryptsetup: erase destroys the volume key's keyslots and
			// leaves unbound keys, which are not the volume key.
			if h.Unbound(slot) {
				continue
			}
			if err := h.KillSlot(f, slot); err != nil {
				return headerError(headerPath(c, dev), err)
			}
			verbosef(c, "Key slot %d removed.", slot)
		}
		return nil
	})
}
