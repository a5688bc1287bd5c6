package main

import (
	"fmt"
	"os"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

var dumpFlags = []cli.Flag{
	&cli.BoolFlag{Name: "dump-volume-key", Usage: "print the volume key (asks for a passphrase)"},
	&cli.BoolFlag{Name: "dump-json-metadata", Usage: "print the LUKS2 JSON metadata"},
	&cli.StringFlag{Name: "volume-key-file", Usage: "with --dump-volume-key or --unbound: write the key to `FILE` instead"},
	&cli.BoolFlag{Name: "unbound", Usage: "with --key-slot: print the unbound key that keyslot holds (asks for its passphrase)"},
}

func init() {
	register(
		&cli.Command{
			Name:      "luksDump",
			Usage:     "print a LUKS header",
			ArgsUsage: "<device>",
			Flags:     flagSet(keyFlags, dumpFlags, typeFlags, tokenFlags),
			Action:    luksDump,
		},
		&cli.Command{
			Name:      "isLuks",
			Usage:     "exit 0 if the device has a LUKS header, 1 if not",
			ArgsUsage: "<device>",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Usage: "require `TYPE` luks1 or luks2"},
				headerFlag,
			},
			Action: isLuks,
		},
		&cli.Command{
			Name:      "luksUUID",
			Usage:     "print or (--uuid) set a LUKS header's UUID",
			ArgsUsage: "<device>",
			Flags: flagSet(typeFlags, []cli.Flag{
				&cli.StringFlag{Name: "uuid", Usage: "new `UUID`"},
				headerFlag,
			}),
			Action: luksUUID,
		},
	)
}

// typeFlags: --type, accepted as by cryptsetup; luks1 or luks2 restricts
// the verb to that header version.
var typeFlags = []cli.Flag{
	&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Usage: "device `TYPE`: luks, luks1 or luks2"},
}

// headerFlag is --header, the detached header file of the verbs that read
// or edit a header.
var headerFlag = &cli.StringFlag{Name: "header", Usage: "detached header `FILE`"}

// requiresArgs is cryptsetup's error for missing positional arguments.
func requiresArgs(c *cli.Context, args string) error {
	return exitf(exitParams, "%s: requires %s as arguments", c.Command.Name, args)
}

// oneDevice returns the verb's device argument. cryptsetup 2.6.1 ignores
// arguments past the ones an action takes (isLuks excepted).
func oneDevice(c *cli.Context) (string, error) {
	if c.NArg() < 1 || c.Args().First() == "" {
		return "", requiresArgs(c, "<device>")
	}
	return c.Args().First(), nil
}

func luksDump(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	// popt turns --dump-master-key into --dump-volume-key, which outranks
	// --unbound, which outranks --dump-json-metadata.
	if c.Bool("unbound") && !c.Bool("dump-volume-key") {
		return luksDumpUnbound(c, dev)
	}
	if !c.Bool("dump-volume-key") {
		h, f, err := readHeaderOfType(c, dev, false)
		if err != nil {
			return err
		}
		f.Close()
		if c.Bool("dump-json-metadata") {
			if h.Version() != 2 {
				return exitf(exitParams, "Dump operation is not supported for this device type.")
			}
			// Exactly the metadata, without a final newline, as cryptsetup.
			_, err := os.Stdout.Write(h.JSON())
			return withCode(exitParams, err)
		}
		return withCode(exitParams, h.Dump(os.Stdout, luks2.DumpOptions{Device: dev}))
	}

	// --dump-volume-key: confirm, unlock, print.
	h, f, err := readHeaderOfType(c, dev, false)
	if err != nil {
		return err
	}
	f.Close()
	if !confirm(c, "The header dump with volume key is sensitive information\n"+
		"that allows access to encrypted partition without a passphrase.\n"+
		"This dump should be stored encrypted in a safe place.") {
		return errAborted(exitPermission, "")
	}
	// cryptsetup's luksDump tries every keyslot whatever --key-slot says,
	// and asks only once.
	v, err := unlockKeyslot(c, dev, true, -1, false, false)
	if err != nil {
		return err
	}
	defer v.Close()
	opts := luks2.DumpOptions{VolumeKey: v.Key.Bytes(), Device: headerPath(c, dev)}
	if err := writeKeyFile(c, &opts, v.Key.Bytes()); err != nil {
		return err
	}
	return withCode(exitParams, h.Dump(os.Stdout, opts))
}

// writeKeyFile writes key to --volume-key-file, if given, and notes it in
// opts: the dump then says where the key went instead of printing it.
func writeKeyFile(c *cli.Context, opts *luks2.DumpOptions, key []byte) error {
	opts.KeyFile = c.String("volume-key-file")
	if opts.KeyFile == "" {
		return nil
	}
	return withCode(exitParams, keyring.WriteKeyFile(opts.KeyFile, key))
}

// luksDumpUnbound is luksDump --unbound -S N: the unbound key keyslot N
// holds, opened with its passphrase, as cryptsetup 2.6.1 prints it (the
// header device's name, or "Key stored to file" with --volume-key-file).
func luksDumpUnbound(c *cli.Context, dev string) error {
	h, f, err := readHeaderOfType(c, dev, false)
	if err != nil {
		return err
	}
	defer f.Close()
	slot := c.Int("key-slot")
	if !h.Unbound(slot) {
		return exitf(exitParams, "Keyslot %d does not contain unbound key.", slot)
	}
	if !confirm(c, "The header dump with unbound key is sensitive information.\n"+
		"This dump should be stored encrypted in a safe place.") {
		return errAborted(exitPermission, "")
	}
	// unlockWith opens unbound keyslots as the verb has --unbound.
	key, _, err := unlockWith(c, h, f, keySource(c), fmt.Sprintf("Enter passphrase for %s: ", dev), slot, false)
	if err != nil {
		return err
	}
	defer key.Wipe()
	verbosef(c, "Key slot %d unlocked.", slot)
	opts := luks2.DumpOptions{Device: headerPath(c, dev)}
	if err := writeKeyFile(c, &opts, key.Bytes()); err != nil {
		return err
	}
	return withCode(exitParams, h.DumpUnbound(os.Stdout, slot, key.Bytes(), opts))
}

func isLuks(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	if c.NArg() > 1 {
		return exitf(exitDevice, "Only one device argument for isLuks operation is supported.")
	}
	hp := headerPath(c, dev)
	d, err := openHeaderDevice(c, hp, false)
	if err != nil {
		return err
	}
	defer d.Close()
	// cryptsetup loads the header (repairing a damaged copy as ever) and
	// says nothing, with -v only what the library said, and its status
	// line.
	h, err := d.read()
	if err != nil && c.Bool("verbose") {
		printPreface(hp, err)
	}
	if err != nil || !typeAdmits(c.String("type"), h.Version()) {
		return exitf(exitParams, "")
	}
	return nil
}

func luksUUID(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	// No LUKS header (of --type): exit 1 silently, as cryptsetup.
	quietly := func(err error) error {
		if err.Error() == fmt.Sprintf("Device %s is not a valid LUKS device.", headerPath(c, dev)) {
			return exitf(exitParams, "")
		}
		return err
	}
	if !c.IsSet("uuid") {
		h, f, err := readHeaderOfType(c, dev, false)
		if err != nil {
			return quietly(err)
		}
		f.Close()
		fmt.Println(h.UUID())
		return nil
	}
	uuid := c.String("uuid")
	if !luks2.ValidUUID(uuid) {
		return exitf(exitParams, "Wrong LUKS UUID format provided.")
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return quietly(err)
	}
	defer f.Close()
	if !confirm(c, "Do you really want to change UUID of device?") {
		return errAborted(exitPermission, "Operation aborted.")
	}
	return f.edit(func() error {
		return headerErrorOrNil(headerPath(c, dev), h.SetUUID(f, uuid))
	})
}
