package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// pbkdfFlags tune the key derivation of new keyslots, with cryptsetup's
// names and units.
var pbkdfFlags = []cli.Flag{
	&cli.StringFlag{Name: "pbkdf", Usage: "PBKDF `TYPE`: argon2id, argon2i or pbkdf2"},
	&cli.StringFlag{Name: "hash", Aliases: []string{"h"}, Usage: "hash `ALGORITHM` for PBKDF2 and the volume key digest"},
	&cli.IntFlag{Name: "iter-time", Aliases: []string{"i"}, Usage: "PBKDF calibration target in `MS`"},
	&cli.IntFlag{Name: "pbkdf-memory", Usage: "argon2 memory cost in `KIB`"},
	&cli.IntFlag{Name: "pbkdf-parallel", Usage: "argon2 `THREADS`"},
	&cli.IntFlag{Name: "pbkdf-force-iterations", Usage: "skip calibration: iterations or argon2 time `COST`"},
	&cli.StringFlag{Name: "keyslot-cipher", Usage: "encrypt the keyslot area with `CIPHER` (LUKS2; default: the data cipher)"},
	&cli.IntFlag{Name: "keyslot-key-size", Usage: "keyslot area key size in `BITS` (with --keyslot-cipher)"},
}

// pbkdfFromFlags returns the PBKDF parameters the flags ask for; zero
// values leave cryptsetup's defaults to luks2.
func pbkdfFromFlags(c *cli.Context) (luks2.PBKDF, error) {
	p := luks2.PBKDF{
		Type:       strings.ToLower(c.String("pbkdf")), // cryptsetup takes any case
		Hash:       c.String("hash"),
		IterTime:   time.Duration(c.Int("iter-time")) * time.Millisecond,
		Iterations: c.Int("pbkdf-force-iterations"),
		MemoryKiB:  c.Int("pbkdf-memory"),
		Parallel:   c.Int("pbkdf-parallel"),
		// Both or neither, checked with the line (verifyLine).
		AreaCipher:  c.String("keyslot-cipher"),
		AreaKeySize: c.Int("keyslot-key-size") / 8,
	}
	// Its name, and --pbkdf-force-iterations with -i, were checked with
	// the line (verifyLine).
	return p, nil
}

// flagSet joins flag groups into one new slice per command.
func flagSet(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

var formatFlags = []cli.Flag{
	&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Usage: "header `TYPE`: luks2 (default) or luks1"},
	&cli.StringFlag{Name: "cipher", Aliases: []string{"c"}, Usage: "cipher `SPEC`, e.g. aes-xts-plain64, or auto to measure this CPU"},
	&cli.IntFlag{Name: "key-size", Aliases: []string{"s"}, Usage: "volume key size in `BITS`"},
	&cli.IntFlag{Name: "sector-size", Usage: "encryption sector size in `BYTES`"},
	&cli.StringFlag{Name: "label", Usage: "header `LABEL`"},
	&cli.StringFlag{Name: "subsystem", Usage: "header `SUBSYSTEM`"},
	&cli.StringFlag{Name: "uuid", Usage: "header `UUID`"},
	&cli.Int64Flag{Name: "offset", Aliases: []string{"o"}, Usage: "data offset in 512-byte `SECTORS`"},
	&cli.Int64Flag{Name: "luks2-metadata-size", Usage: "LUKS2 metadata area size in `BYTES`"},
	&cli.Int64Flag{Name: "luks2-keyslots-size", Usage: "LUKS2 keyslots area size in `BYTES`"},
	&cli.StringFlag{Name: "volume-key-file", Usage: "use the volume key in `FILE`"},
	&cli.BoolFlag{Name: "verify-passphrase", Aliases: []string{"y"}, Usage: "ask for the passphrase twice"},
	&cli.Int64Flag{Name: "align-payload", Usage: "align the data offset to `SECTORS` of 512 bytes"},
	&cli.Int64Flag{Name: "device-size", Usage: "create a remote volume (s3://) of `SIZE` bytes first"},
	&cli.StringFlag{Name: "chunk-size", Usage: "with --device-size: keep the volume in chunk objects of `SIZE` (default 4M; a power of two from 64K to 64M)"},
}

func init() {
	register(&cli.Command{
		Name:      "luksFormat",
		Usage:     "format a LUKS2 (or --type luks1) device",
		ArgsUsage: "<device> [<new key file>]",
		Flags:     flagSet(keyFlags, pbkdfFlags, formatFlags),
		Action:    luksFormat,
	})
}

// formatVersion is the LUKS version --type asks for: 2 (cryptsetup's
// default) or 1; cryptsetup reads the type without regard to case.
func formatVersion(c *cli.Context) (int, error) {
	switch strings.ToLower(c.String("type")) {
	case "", "luks", "luks2":
		return 2, nil
	case "luks1":
		return 1, nil
	}
	return 0, exitf(exitParams, "Unsupported device type %s.", c.String("type"))
}

// formatOptions turns the flags into luks2.FormatOptions for a header of
// LUKS version.
func formatOptions(c *cli.Context, version int) (luks2.FormatOptions, error) {
	opts := luks2.FormatOptions{
		Cipher:       c.String("cipher"),
		SectorSize:   c.Int("sector-size"),
		Hash:         c.String("hash"),
		UUID:         c.String("uuid"),
		Label:        c.String("label"),
		Subsystem:    c.String("subsystem"),
		MetadataSize: c.Int64("luks2-metadata-size"),
		KeyslotsSize: c.Int64("luks2-keyslots-size"),
		DataOffset:   c.Int64("offset") * 512,
		Keyslot:      c.Int("key-slot"),
		Version:      version,
		DetachedData: c.String("header") != "",
	}
	var err error
	if opts.PBKDF, err = pbkdfFromFlags(c); err != nil {
		return opts, err
	}
	if err := checkKeyslotCipher(version, opts.PBKDF); err != nil {
		return opts, err
	}
	if version == 1 {
		if err := luks1FormatOptions(c, &opts); err != nil {
			return opts, err
		}
	}
	if err := checkPBKDF(version, opts.PBKDF); err != nil {
		return opts, err
	}
	// Sizes and sector sizes were checked as popt read them (options.go).
	opts.KeySize = c.Int("key-size") / 8
	if opts.Cipher == "auto" {
		spec, sector, reason := luks2.AutoCipher()
		if c.Bool("verbose") {
			fmt.Printf("Cipher %s chosen: %s.\n", spec, reason)
		}
		opts.Cipher = spec
		if opts.SectorSize == 0 && version == 2 {
			opts.SectorSize = sector
		}
	}
	if opts.UUID != "" && !luks2.ValidUUID(opts.UUID) {
		return opts, exitf(exitParams, "Wrong LUKS UUID format provided.")
	}
	// A negative --key-slot never gets here (popt's callback refuses it).
	if last := luks2.MaxKeyslots(version) - 1; opts.Keyslot > last {
		return opts, exitf(exitParams, "Key slot %d is invalid, please select between 0 and %d.", opts.Keyslot, last)
	}
	if !opts.DetachedData && !luks2.DataOffsetAligned(opts.DataOffset) {
		return opts, exitf(exitParams, "Data offset is not multiple of 4096 bytes.")
	}
	if align := c.Int64("align-payload"); align > 0 {
		if version == 2 && (opts.DetachedData || opts.MetadataSize != 0 || opts.KeyslotsSize != 0) {
			// cryptsetup then shrinks the keyslots area to fit; luks2
			// aligns only the default layout.
			return opts, exitf(exitParams, "Option --align-payload is not supported by luksd with --header or --luks2-*-size.")
		}
		opts.PayloadAlign = align * 512
	}
	return opts, nil
}

// luks1FormatOptions adjusts opts for luksFormat --type luks1 as cryptsetup
// 2.6.1 does: LUKS2 area sizes and sector sizes other than 512 are refused,
// a label or subsystem is dropped without a word, and an argon2 PBKDF is
// reported and replaced by PBKDF2 with its defaults (the requested timing
// and forced iterations go with it; the hash stays).
func luks1FormatOptions(c *cli.Context, opts *luks2.FormatOptions) error {
	if c.IsSet("luks2-metadata-size") || c.IsSet("luks2-keyslots-size") {
		return exitf(exitParams, "Unsupported LUKS2 metadata size options.")
	}
	if opts.SectorSize != 0 && !luks2.ValidSectorSize(1, opts.SectorSize) {
		return exitf(exitParams, "Unsupported encryption sector size.")
	}
	opts.Label, opts.Subsystem = "", ""
	if t := opts.PBKDF.Type; t != "" && t != "pbkdf2" {
		fmt.Fprintln(os.Stderr, "Requested PBKDF type is not supported for LUKS1.")
		opts.PBKDF = luks2.PBKDF{Type: "pbkdf2", Hash: opts.PBKDF.Hash}
	}
	return nil
}

// growsToHeader reports whether formatting f (size bytes) with layout l
// needs the file to grow: cryptsetup writes a header to an image file
// smaller than the data offset (the file grows, as any write past its end
// does) and only warns that no space is left for data. A block device
// cannot grow; luks2.Format refuses it.
func growsToHeader(f luks2.File, size int64, opts luks2.FormatOptions, l luks2.Layout) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || opts.DetachedData || opts.MetadataSize != 0 || opts.KeyslotsSize != 0 && opts.DataOffset == 0 {
		return false
	}
	return size <= l.DataOffset
}

func luksFormat(c *cli.Context) error {
	dev := c.Args().Get(0)
	if dev == "" {
		return requiresArgs(c, "<device>")
	}
	// Further arguments are ignored, as by cryptsetup.
	version, err := formatVersion(c)
	if err != nil {
		return err
	}
	opts, err := formatOptions(c, version)
	if err != nil {
		return err
	}
	if err := createRemote(c, dev); err != nil {
		return err
	}
	alignToChunks(dev, &opts)
	hd, release, err := openFormatTarget(c, dev)
	if err != nil {
		return err
	}
	defer release()
	if err := confirmFormat(c, hd); err != nil {
		return err
	}
	vk, err := formatVolumeKey(c, &opts)
	if err != nil {
		return err
	}
	defer vk.Wipe()
	pass, err := formatPassphrase(c, dev)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	plan := planFormat(hd, &opts)
	var h *luks2.Header
	err = hd.edit(func() error {
		var key []byte
		var err error
		h, key, err = luks2.Format(hd, plan.size, opts, pass.Bytes())
		clear(key)
		if err != nil {
			return formatError(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return finishFormat(c, hd, h, plan)
}

// openFormatTarget opens the header device for writing, the data device
// or --header (created if absent, after the data device is checked), and
// claims both as an open volume does; release closes them.
func openFormatTarget(c *cli.Context, dev string) (hd *headerDevice, release func(), err error) {
	hp := headerPath(c, dev)
	if hp != dev {
		d, _, err := openDevice(dev, true)
		if err != nil {
			return nil, nil, err
		}
		d.Close()
		if f, err := os.OpenFile(hp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
	}
	if hd, err = openHeaderDevice(c, hp, true); err != nil {
		return nil, nil, err
	}
	closers := []io.Closer{hd}
	release = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}
	for _, p := range []string{dev, hp} {
		claim, err := claimExclusive(p)
		if err != nil {
			release()
			return nil, nil, err
		}
		if claim != nil {
			closers = append(closers, claim)
		}
		if hp == dev {
			break
		}
	}
	return hd, release, nil
}

// confirmFormat warns about a LUKS header already there, asks before
// anything is overwritten, and names the signatures the format wipes.
func confirmFormat(c *cli.Context, hd *headerDevice) error {
	if luks2.IsLUKS(hd.File) && !c.Bool("batch-mode") {
		fmt.Printf("WARNING: Device %s already contains a 'crypto_LUKS' superblock signature.\n", hd.Path)
	}
	if !confirm(c, fmt.Sprintf("This will overwrite data on %s irrevocably.", hd.Path)) {
		return errAborted(exitParams, "Operation aborted.")
	}
	for range luks2.LUKSSignatures(hd.File) {
		verbosef(c, "Existing 'crypto_LUKS' superblock signature on device %s will be wiped.", hd.Path)
	}
	return nil
}

// formatVolumeKey reads --volume-key-file (its first key size bytes) into
// opts.VolumeKey; nil without the option. The caller wipes it.
func formatVolumeKey(c *cli.Context, opts *luks2.FormatOptions) (*keyring.Secret, error) {
	p := c.String("volume-key-file")
	if p == "" {
		return nil, nil
	}
	if opts.KeySize == 0 {
		opts.KeySize = luks2.DefaultKeySize(opts.Cipher)
	}
	vk, err := keyring.ReadKeyFile(p, opts.KeySize)
	if err != nil {
		return nil, keyError(err)
	}
	opts.VolumeKey = vk.Bytes()
	return vk, nil
}

// formatPassphrase reads the new volume's passphrase: --key-file or the
// positional key file, else the terminal (twice with -y) or stdin.
func formatPassphrase(c *cli.Context, dev string) (*keyring.Secret, error) {
	src := keySource(c)
	if src.KeyFile == "" && c.NArg() > 1 {
		src.KeyFile = c.Args().Get(1)
	}
	if c.Bool("verify-passphrase") && !stdinIsTerminal() {
		fmt.Fprintln(os.Stderr, "Can't do passphrase verification on non-tty inputs.")
	}
	return readPassphrase(src, fmt.Sprintf("Enter passphrase for %s: ", dev), true)
}

// formatPlan is how luksFormat has luks2 format the header device.
type formatPlan struct {
	layout luks2.Layout
	size   int64 // the data device size luks2.Format is told
	grows  bool  // an image file grows to the data offset after
}

// planFormat asks luks2 where the format puts the data and decides
// whether an image file smaller than that grows (then luks2 formats the
// header alone, with the sector size it would pick for the image); it
// passes on cryptsetup's warning about a small keyslots area. Options
// luks2 refuses give no layout: Format then says why.
func planFormat(hd *headerDevice, opts *luks2.FormatOptions) formatPlan {
	plan := formatPlan{size: hd.Size}
	layout, err := luks2.FormatLayout(*opts)
	if err != nil {
		return plan
	}
	plan.layout = layout
	if plan.grows = growsToHeader(hd.File, hd.Size, *opts, layout); plan.grows {
		plan.size = 0
		if opts.SectorSize == 0 {
			opts.SectorSize = luks2.DefaultSectorSize(hd.Size, *opts)
		}
	}
	if layout.SmallKeyslotsArea() {
		fmt.Printf("WARNING: keyslots area (%d bytes) is very small, available LUKS2 keyslot count is very limited.\n", layout.KeyslotsSize)
	}
	return plan
}

// finishFormat grows an image file to the data offset as planned, makes
// the header durable, and with -v names the new keyslot.
func finishFormat(c *cli.Context, hd *headerDevice, h *luks2.Header, plan formatPlan) error {
	if plan.grows {
		if err := hd.Truncate(plan.layout.DataOffset); err != nil {
			return exitf(exitDevice, "Cannot write header to %s: %v", hd.Path, err)
		}
		fmt.Printf("Device %s is too small for activation, there is no remaining space for data.\n", hd.Path)
	}
	if err := hd.Sync(); err != nil {
		return exitf(exitDevice, "Cannot write header to %s: %v", hd.Path, err)
	}
	if c.Bool("verbose") {
		if slots := h.ActiveKeyslots(); len(slots) > 0 {
			fmt.Printf("Key slot %d created.\n", slots[0])
		}
	}
	return nil
}

// formatError maps luks2.Format's errors to one line with an exit code.
func formatError(err error) error {
	if errors.Is(err, luks2.ErrNoKeyslotSpace) {
		return exitf(exitParams, "No space for new keyslot.")
	}
	if errors.Is(err, luks2.ErrUnsupported) {
		return withCode(exitParams, err)
	}
	if errors.Is(err, luks2.ErrLUKS1DataOffset) {
		return exitf(exitParams, "Data offset for LUKS header must be either 0 or higher than header size.")
	}
	return exitf(exitParams, "Cannot format device: %v", err)
}
