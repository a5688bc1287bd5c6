package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/daemon/frontend"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/nbd"
	"github.com/urfave/cli/v2"
)

func init() {
	openFlags := []cli.Flag{
		&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Value: "luks", Usage: "device `TYPE`: luks, luks2 or luks1"},
		&cli.BoolFlag{Name: "readonly", Aliases: []string{"r"}, Usage: "activate read-only"},
		&cli.BoolFlag{Name: "allow-discards", Usage: "pass discards (TRIM) down to the image"},
		&cli.BoolFlag{Name: "shared", Usage: "plain: do not claim the device, so other mappings of it may exist"},
		&cli.StringFlag{Name: "frontend", Value: "auto", Usage: "kernel block device: `nbd`, ublk or auto (ublk when available)"},
		&cli.StringFlag{Name: "nbd-device", Usage: "use `/dev/nbdN` instead of a free one"},
		&cli.StringFlag{Name: "ublk-device", Usage: "use `/dev/ublkbN` instead of a free one"},
		&cli.StringFlag{Name: "mapping", Value: "auto", Usage: "make /dev/mapper/NAME a device-mapper linear `MAPPING` (dm), a symlink to the block device (symlink), or auto (dm where the kernel has device-mapper)"},
		&cli.BoolFlag{Name: "foreground", Usage: "stay in the foreground (for systemd); ready once the device exists"},
		&cli.BoolFlag{Name: "recover", Usage: "take over the kernel device of a daemon that died (needs --nbd-device for nbd)"},
		&cli.UintFlag{Name: "io-timeout", Usage: "fail a request the disk has not carried out in `SECONDS` with EIO, the device stays (0: wait as long as it takes, as dm-crypt)"},
		&cli.BoolFlag{Name: "test-passphrase", Usage: "only check that the passphrase unlocks a keyslot"},
		&cli.BoolFlag{Name: "unbound", Usage: "with --test-passphrase: unbound keyslots count too"},
		&cli.BoolFlag{Name: "refresh", Usage: "check the key of an active volume again (cryptsetup refresh)"},
		&cli.BoolFlag{Name: "persistent", Usage: "store the activation flags of the line (--allow-discards, --perf-*) in the LUKS2 header"},
	}
	register(&cli.Command{
		Name:      "open",
		Aliases:   []string{"luksOpen", "plainOpen", "create", "refresh"},
		Usage:     "unlock a LUKS volume and attach it as a kernel block device",
		ArgsUsage: "IMAGE NAME",
		Flags:     flagSet(openFlags, perfFlags(), keyFlags, tokenFlags, plainFlags),
		Action:    openAction,
	}, &cli.Command{
		Name:   daemon.ChildVerb,
		Hidden: true,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "config-fd", Value: -1},
			&cli.IntFlag{Name: "ready-fd", Value: -1},
		},
		Action: daemonAction,
	})
}

// openAction is `luksd open IMAGE NAME`: it checks what it can before the
// passphrase is asked for (the name is free, the image is not in use, the
// header is one of --type, a frontend is usable), reads the header once,
// unlocks it and hands the volume to a daemon.
func openAction(c *cli.Context) error {
	if c.Bool("test-passphrase") {
		return testPassphrase(c)
	}
	if c.Bool("refresh") {
		return refreshVolume(c)
	}
	if c.NArg() != 2 {
		return exitf(exitParams, "Command requires device and mapped name as arguments.")
	}
	image, name := resolveDevice(c.Args().Get(0)), c.Args().Get(1)
	if err := daemon.ValidName(name); err != nil {
		return err
	}
	opts, frontendName, err := openOptions(c)
	if err != nil {
		return err
	}
	if err := daemon.CheckFree(name); err != nil {
		return err
	}
	// A device in use is refused before the passphrase is asked; the
	// daemon's claim is what keeps it so. --shared (plain only, checked
	// with the line) claims nothing, as cryptsetup checks nothing then.
	if !opts.Shared {
		if daemon.UserOf(image) != "" {
			return daemon.InUse(image, nil)
		}
		if err := checkNotInUse(image, opts.ReadOnly); err != nil {
			return err
		}
	}
	if c.String("type") == "plain" {
		return openPlain(c, image, name, opts, frontendName)
	}
	// The header, read once: its --type is checked before a passphrase
	// is asked for, and it is what the passphrase unlocks.
	h, hd, err := readHeaderOfType(c, image, false)
	if err != nil {
		return err
	}
	defer hd.Close()
	if err := pickFrontend(name, frontendName, &opts); err != nil {
		return err
	}
	if err := checkDataDevice(c, image, opts.ReadOnly); err != nil {
		return err
	}
	v, err := unlockHeader(c, image, h, hd, c.Int("key-slot"), true, true)
	if err != nil {
		return err
	}
	defer v.Close()
	hd.Close() // the daemon never reads the header again
	if c.Bool("foreground") {
		storeFlags(c, image) // Exec returns only when the volume closes
	}
	if err := startVolume(c, v.spec(name, opts), v.Key); err != nil {
		return err
	}
	if !c.Bool("foreground") {
		storeFlags(c, image)
	}
	return nil
}

// openPlain is open --type plain: the layout from the options, the key
// from the passphrase or key file, then the daemon as for LUKS.
func openPlain(c *cli.Context, image, name string, opts daemon.Options, frontendName string) error {
	seg, err := plainSegment(c, image)
	if err != nil {
		return err
	}
	if err := pickFrontend(name, frontendName, &opts); err != nil {
		return err
	}
	key, err := plainKey(c, image, seg.KeySize)
	if err != nil {
		return err
	}
	defer key.Wipe()
	return startVolume(c, plainSpec(name, image, seg, opts), key)
}

// pickFrontend resolves frontendName into opts, and the device a dead
// daemon of name recorded with --recover; without it, it clears what such
// a daemon left.
func pickFrontend(name, frontendName string, opts *daemon.Options) error {
	fe, err := frontend.Pick(frontendName)
	if err != nil {
		return err // frontend.ErrUnavailable: exit 1
	}
	opts.Frontend = fe.Name()
	if opts.Recover && opts.Device == "" {
		// Take over the device the dead daemon recorded.
		opts.Device = daemon.RecordedDevice(name, opts.Frontend)
	}
	if !opts.Recover {
		// A fresh start: release what a dead daemon of NAME left behind
		// (its /dev/nbdN would otherwise stay configured forever).
		cleanStale(name)
	}
	return nil
}

// startVolume hands spec and key to a daemon: this process with
// --foreground, else a detached one whose device it prints.
func startVolume(c *cli.Context, spec daemon.Spec, key *keyring.Secret) error {
	if c.Bool("foreground") {
		return daemon.Exec(spec, key)
	}
	dev, err := daemon.Spawn(spec, key)
	if err != nil {
		return err
	}
	fmt.Println(dev)
	return nil
}

// openOptions returns how open's flags ask the volume to be exposed, and
// the frontend they name (a name, or auto).
func openOptions(c *cli.Context) (daemon.Options, string, error) {
	opts := daemon.Options{
		ReadOnly:      c.Bool("readonly"),
		AllowDiscards: c.Bool("allow-discards"),
		Shared:        c.Bool("shared"),
		Recover:       c.Bool("recover"),
		IOTimeout:     time.Duration(min(c.Uint("io-timeout"), math.MaxInt32)) * time.Second,
	}
	if err := checkOpenType(c.String("type"), false); err != nil {
		return opts, "", err
	}
	switch m := c.String("mapping"); m {
	case "auto":
	case "dm", "symlink":
		opts.Mapping = m
	default:
		return opts, "", exitf(exitParams, "Unknown --mapping %s (dm, symlink or auto).", m)
	}
	fe, err := deviceWish(c, &opts)
	return opts, fe, err
}

// deviceWish applies --nbd-device or --ublk-device to opts and returns the
// frontend they imply (or --frontend).
func deviceWish(c *cli.Context, opts *daemon.Options) (string, error) {
	fe := c.String("frontend")
	nbdDev, ublkDev := c.String("nbd-device"), c.String("ublk-device")
	switch {
	case nbdDev != "" && ublkDev != "":
		return "", exitf(exitParams, "--nbd-device and --ublk-device exclude each other.")
	case nbdDev != "":
		if fe == "auto" {
			fe = "nbd"
		}
		if fe != "nbd" {
			return "", exitf(exitParams, "--nbd-device needs --frontend nbd.")
		}
		if _, err := nbd.ParseDevicePath(nbdDev); err != nil {
			return "", exitf(exitParams, "%v", err)
		}
		opts.Device = nbdDev
	case ublkDev != "":
		if fe == "auto" {
			fe = "ublk"
		}
		if fe != "ublk" {
			return "", exitf(exitParams, "--ublk-device needs --frontend ublk.")
		}
		opts.Device = ublkDev
	}
	return fe, nil
}

// daemonAction is the daemon process `luksd open` starts (daemon.Spawn,
// daemon.Exec): the daemon's errors take the CLI's exit codes.
func daemonAction(c *cli.Context) error {
	fd := c.Int("config-fd")
	if fd < 3 {
		return exitf(exitParams, "%s is luksd's internal daemon verb; use `luksd open`.", daemon.ChildVerb)
	}
	logInDaemon()
	err := daemon.RunChild(fd, c.Int("ready-fd"), exitCodeOf)
	if errors.Is(err, daemon.ErrReported) {
		return exitf(exitParams, "") // told the parent already
	}
	return err
}

// cleanStale removes what a dead daemon of name left (daemon.CleanStale),
// saying why a kernel device it held could not be released, and reports
// whether there was anything.
func cleanStale(name string) bool {
	cleaned, err := daemon.CleanStale(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
	}
	return cleaned
}
