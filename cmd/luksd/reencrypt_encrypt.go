package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// reencrypt --encrypt and --decrypt, as cryptsetup 2.6.1 runs them
// offline. --encrypt --reduce-device-size SIZE encrypts a plain device in
// place: a new LUKS2 header takes the first SIZE/2 bytes, the data is
// shifted by as much, and the device's last SIZE bytes are given up
// (luks2.EncryptInit); then the encryption runs as any reencryption.

// encryptFlags are the options of reencrypt --encrypt beyond a plain
// reencryption's: the new header's, as luksFormat takes them.
var encryptFlags = flagSet(pbkdfFlags, []cli.Flag{
	&cli.BoolFlag{Name: "encrypt", Usage: "encrypt a plain device in place"},
	&cli.BoolFlag{Name: "decrypt", Usage: "decrypt a LUKS2 device in place"},
	&cli.Int64Flag{Name: "reduce-device-size", Usage: "give up the device's last `BYTES` and shift the data by all of it (by half of it with --encrypt)"},
}, pickFlags(formatFlags, "type", "uuid", "label", "subsystem", "offset", "luks2-metadata-size", "luks2-keyslots-size"))

// pickFlags are the flags of set named names.
func pickFlags(set []cli.Flag, names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range set {
		if slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

// newHeaderOptions are the options only a new header (--encrypt) takes.
var newHeaderOptions = []string{"uuid", "label", "subsystem", "offset", "luks2-metadata-size", "luks2-keyslots-size", "reduce-device-size"}

// encryptsPlainDevice reports whether reencrypt is to start encrypting
// dev: --encrypt on a device without a LUKS header.
func encryptsPlainDevice(c *cli.Context, dev string) bool {
	if !c.Bool("encrypt") {
		return false
	}
	f, _, err := openDevice(headerPath(c, dev), false)
	if err != nil {
		return c.IsSet("header") // a detached header yet to be made
	}
	defer f.Close()
	return !luks2.IsLUKS(f)
}

// checkReencryptMode refuses what cryptsetup refuses for the mode asked
// for on a LUKS2 volume (marked: in reencryption already), and the
// options luksd takes for a new header only.
func checkReencryptMode(c *cli.Context, h *luks2.Header, dev string) error {
	marked := h.InReencryption()
	mode := h.ReencryptMode()
	switch {
	case c.Bool("encrypt") && !marked:
		return exitf(exitParams, "Device %s is already LUKS device. Aborting operation.", headerPath(c, dev))
	case c.Bool("encrypt") && mode != "encrypt":
		return exitf(exitParams, "Device is not in LUKS2 encryption. Conflicting option --encrypt.")
	case c.Bool("decrypt") && marked && mode != "decrypt":
		return exitf(exitParams, "Device is not in LUKS2 decryption. Conflicting option --decrypt.")
	case c.Bool("decrypt") && !marked && !c.IsSet("header"):
		return exitf(exitParams, "LUKS2 decryption requires --header option.")
	case c.Bool("decrypt") && !marked:
		return exitf(exitParams, "Option --decrypt is not supported by luksd yet.")
	case marked && mode == "encrypt" && h.ReencryptResilience() == "datashift" && c.IsSet("resilience") && c.String("resilience") != "datashift":
		return exitf(exitParams, "Device is in reencryption using datashift resilience. Requested --resilience option cannot be applied.")
	}
	if !c.Bool("encrypt") {
		for _, o := range newHeaderOptions {
			if c.IsSet(o) && o != "reduce-device-size" { // reencrypt_shift.go
				return exitf(exitParams, "Option --%s is not supported by luksd reencrypt without --encrypt.", o)
			}
		}
	}
	return nil
}

// reencryptEncrypt starts encrypting the plain device dev and, unless
// --init-only, runs the encryption.
func reencryptEncrypt(c *cli.Context, dev string) error {
	switch {
	case c.Bool("resume-only"):
		return exitf(exitParams, "Device reencryption not in progress.")
	case c.IsSet("header") && c.IsSet("reduce-device-size"):
		if f, size, err := openDevice(dev, false); err == nil {
			err = refuseLUKSData(f, size, dev)
			f.Close()
			if err != nil {
				return err
			}
		}
		return exitf(exitParams, "Option --header with --reduce-device-size is not supported by luksd yet.")
	case c.IsSet("header"):
		return reencryptEncryptDetached(c, dev) // reencrypt_encrypt_header.go
	case c.Int64("reduce-device-size") == 0:
		return exitf(exitParams, "Encryption without detached header (--header) is not possible without data device size reduction (--reduce-device-size).")
	case c.NArg() > 1:
		return exitf(exitParams, "Online encryption (a device NAME) is not supported by luksd.")
	}
	version, err := formatVersion(c)
	if err != nil {
		return err
	}
	if version != 2 {
		return exitf(exitParams, "LUKS1 encryption (reencrypt --type luks1) is not supported by luksd.")
	}
	opts, err := formatOptions(c, version)
	if err != nil {
		return err
	}
	reduce := c.Int64("reduce-device-size")
	if off := opts.DataOffset; off != 0 && off != reduce/2 {
		return exitf(exitParams, "Option --offset with --encrypt is supported by luksd only as half of --reduce-device-size.")
	}
	if !luks2.DataOffsetAligned(reduce / 2) {
		return exitf(exitParams, "Data offset is not multiple of 4096 bytes.")
	}
	if opts.UUID == "" {
		if opts.UUID, err = luks2.NewUUID(); err != nil {
			return err
		}
	}
	claim, err := claimExclusive(dev)
	if err != nil {
		return err
	}
	if claim != nil {
		defer claim.Close()
	}
	f, err := openHeaderDevice(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	// cryptsetup formats a temporary header file first, and names it.
	temp := fmt.Sprintf("LUKS2-temp-%s.new", opts.UUID)
	if !confirm(c, fmt.Sprintf("This will overwrite data on %s irrevocably.", temp)) {
		return errAborted(exitParams, "Operation aborted.")
	}
	pass, err := readPassphrase(keySource(c), fmt.Sprintf("Enter passphrase for %s: ", temp), true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	warnSmallKeyslots(opts, reduce/2)
	err = f.edit(func() error { return luks2.EncryptInit(f, f.Size, reduce, opts, pass.Bytes()) })
	if err := initFailure(c, dev, err); err != nil || c.Bool("init-only") {
		return err
	}
	return runJustMarked(c, f, dev, pass.Bytes(), f.File, f.Size)
}

// warnSmallKeyslots prints luksFormat's warning (even with --batch-mode,
// as cryptsetup) when the header of an in-place encryption, which ends
// at offset, leaves little room for keyslots.
func warnSmallKeyslots(opts luks2.FormatOptions, offset int64) {
	opts.DataOffset, opts.DetachedData, opts.PayloadAlign = offset, false, 0
	if l, err := luks2.FormatLayout(opts); err == nil && l.SmallKeyslotsArea() {
		fmt.Printf("WARNING: keyslots area (%d bytes) is very small, available LUKS2 keyslot count is very limited.\n", l.KeyslotsSize)
	}
}

// initFailure says in cryptsetup's words why the init of an in-place
// encryption or decryption failed (nil when err is nil).
func initFailure(c *cli.Context, dev string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, luks2.ErrDeviceTooSmall):
		fmt.Fprintf(os.Stderr, "Device %s is too small.\n", dev)
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	case errors.Is(err, luks2.ErrUnsupported):
		return withCode(exitParams, err)
	default:
		verbosef(c, "%v", err)
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	}
}

// runJustMarked runs the encryption an init has just written to the
// header on f (named hp), under the reencryption lock, with the data on
// data (size bytes).
func runJustMarked(c *cli.Context, f *headerDevice, hp string, pass []byte, data luks2.DataDevice, size int64) error {
	h, err := f.read()
	if err != nil {
		return headerError(hp, err)
	}
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	return runReencrypt(c, h, f, hp, pass, data, size)
}
