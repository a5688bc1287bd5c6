package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "repair",
		Usage:     "repair a LUKS header (a damaged LUKS2 copy, LUKS1 keyslots, an interrupted reencryption)",
		ArgsUsage: "<device>",
		Flags:     flagSet(keyFlags, typeFlags),
		Action:    repair,
	})
}

// repair is cryptsetup 2.6.1's repair. A LUKS2 header that loads (a
// damaged copy is rewritten from the good one as it loads) needs nothing
// more; otherwise, after asking, a LUKS1 header's keyslots are repaired
// (luks2.RepairLUKS1) and a LUKS2 header's bad copy is rewritten, even
// where another signature makes a load refuse. Then a LUKS2 volume in
// reencryption has its reencryption metadata verified, or a crashed
// hotzone recovered, with a passphrase.
func repair(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	hp := headerPath(c, dev)
	d, err := openHeaderDevice(c, hp, true)
	if err != nil {
		return err
	}
	defer d.Close()
	log := repairLog(c)
	h, err := d.read()
	if err == nil && !typeAdmits(c.String("type"), h.Version()) {
		err = luks2.ErrNotLUKS
	}
	if err == nil && h.Version() == 2 {
		verbosef(c, "No known problems detected for LUKS header.")
		return reencryptRepair(c, dev, d, h)
	}
	var lock *luks2.LockError
	if errors.As(err, &lock) {
		return lockError(err)
	}
	luks1 := isLUKS1(d)
	if err != nil && c.Bool("verbose") {
		// cryptsetup's load says why, with -v.
		if luks1 {
			luks2.CheckLUKS1(d, d.Size, hp, repairLog(c))
		} else {
			printPreface(hp, err)
		}
	}
	if !c.Bool("batch-mode") && stdinIsTerminal() {
		if sig := luks2.ForeignSignature(d); sig != "" {
			fmt.Printf("WARNING: Device %s already contains a '%s' superblock signature.\n", hp, sig)
		}
	}
	if !confirm(c, "Really try to repair LUKS device header?") {
		fmt.Fprint(os.Stderr, "Operation aborted.\n\n")
		return exitf(exitParams, "")
	}
	if t := c.String("type"); t != "" && t != "luks" && !typeAdmits(t, primaryVersion(luks1)) {
		// cryptsetup will not load a header as the other version.
		return exitf(exitParams, "")
	}
	if luks1 {
		return d.edit(func() error {
			if err := luks2.RepairLUKS1(d, d.Size, hp, log); err != nil {
				return exitf(exitParams, "")
			}
			return nil
		})
	}
	err = d.edit(func() error {
		if h, err = luks2.ReadLUKS2(d, d.Size); err != nil {
			return err
		}
		return h.Repair(d)
	})
	if err != nil {
		printPreface(hp, err)
		return headerOrNotLUKS(hp, err)
	}
	return reencryptRepair(c, dev, d, h)
}

// repairLog prints a repair's messages where cryptsetup prints them.
func repairLog(c *cli.Context) luks2.RepairLog {
	return luks2.RepairLog{
		Err: func(s string) { fmt.Fprintln(os.Stderr, s) },
		Verbose: func(s string) {
			if c.Bool("verbose") {
				fmt.Println(s)
			}
		},
	}
}

// isLUKS1 reports whether the primary header says LUKS version 1.
func isLUKS1(r interface {
	ReadAt([]byte, int64) (int, error)
}) bool {
	var b [8]byte
	if _, err := r.ReadAt(b[:], 0); err != nil {
		return false
	}
	return string(b[:6]) == "LUKS\xba\xbe" && b[6] == 0 && b[7] == 1
}

// primaryVersion is the LUKS version a load takes the header for.
func primaryVersion(luks1 bool) int {
	if luks1 {
		return 1
	}
	return 2
}

// reencryptRepair is what cryptsetup's repair does last for a LUKS2
// volume in reencryption: a crashed hotzone is recovered (after asking),
// otherwise the reencryption metadata is verified; both with a passphrase.
func reencryptRepair(c *cli.Context, dev string, d *headerDevice, h *luks2.Header) error {
	if !h.InReencryption() {
		return nil
	}
	prompt := "Enter passphrase to verify reencryption metadata digest: "
	if h.ReencryptCrashed() {
		if !confirm(c, "Really proceed with LUKS2 reencryption recovery?") {
			fmt.Fprint(os.Stderr, "Operation aborted.\n\n")
			return exitf(exitParams, "")
		}
		prompt = "Enter passphrase for reencryption recovery: "
	}
	pass, err := readPassphrase(keySource(c), prompt, false)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	var data luks2.Device = d
	dataSize := d.Size
	if hp := headerPath(c, dev); hp != dev {
		f, size, err := openDevice(dev, true)
		if err != nil {
			return err
		}
		defer f.Close()
		data, dataSize = syncedFile{f}, size
	}
	err = d.edit(func() error {
		h, err := d.read()
		if err != nil {
			return err
		}
		m, err := h.OpenReencryptingDetached(d, data, dataSize, pass.Bytes(), c.Int("key-slot"), nil)
		if err == nil {
			m.Wipe()
		}
		return err
	})
	if errors.Is(err, luks2.ErrWrongPassphrase) {
		return exitf(exitParams, "") // cryptsetup 2.6.1 says nothing
	}
	if err != nil {
		return reencryptRunError(headerPath(c, dev), err)
	}
	return nil
}
