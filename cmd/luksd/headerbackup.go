package main

import (
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

var headerBackupFlags = []cli.Flag{
	&cli.StringFlag{Name: "header-backup-file", Usage: "header backup `FILE`"},
	&cli.StringFlag{Name: "header", Usage: "detached header `FILE`"},
	&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Usage: "device `TYPE` (accepted for cryptsetup compatibility)"},
}

func init() {
	register(
		&cli.Command{
			Name:      "luksHeaderBackup",
			Usage:     "save the LUKS header and keyslots to --header-backup-file",
			ArgsUsage: "<device>",
			Flags:     flagSet(headerBackupFlags),
			Action:    luksHeaderBackup,
		},
		&cli.Command{
			Name:      "luksHeaderRestore",
			Usage:     "restore the LUKS header and keyslots from --header-backup-file",
			ArgsUsage: "<device>",
			Flags:     flagSet(headerBackupFlags),
			Action:    luksHeaderRestore,
		},
	)
}

// backupFile returns --header-backup-file or cryptsetup's error.
func backupFile(c *cli.Context) (string, error) {
	p := c.String("header-backup-file")
	if p == "" {
		return "", exitf(exitParams, "Option --header-backup-file is required.")
	}
	return p, nil
}

func luksHeaderBackup(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	path, err := backupFile(c)
	if err != nil {
		return err
	}
	hp := headerPath(c, dev)
	f, size, err := openDevice(hp, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if !luks2.IsLUKS(f) {
		return exitf(exitParams, "Device %s is not a valid LUKS device.", hp)
	}
	if _, err := os.Lstat(path); err == nil {
		return exitf(exitParams, "Requested header backup file %s already exists.", path)
	}
	// cryptsetup creates the backup read-only for its owner.
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return exitf(exitParams, "Cannot create header backup file %s.", path)
	}
	err = luks2.Backup(f, size, out)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return headerError(hp, err)
	}
	return nil
}

func luksHeaderRestore(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	path, err := backupFile(c)
	if err != nil {
		return err
	}
	b, bsize, err := openDevice(path, false)
	if err != nil {
		return exitf(exitParams, "Header backup file does not contain compatible LUKS header.")
	}
	defer b.Close()
	if !luks2.IsLUKS(b) {
		return exitf(exitParams, "Header backup file does not contain compatible LUKS header.")
	}
	hp := headerPath(c, dev)
	f, size, err := openDevice(hp, true)
	if err != nil {
		return err
	}
	defer f.Close()
	// cryptsetup names the LUKS version: the device's, else the backup's.
	version := 2
	if bh, err := luks2.Read(b, bsize); err == nil {
		version = bh.Version()
	}
	msg := fmt.Sprintf("Device %s does not contain LUKS%d header. Replacing header can destroy data on that device.", hp, version)
	if luks2.IsLUKS(f) {
		if h, err := luks2.Read(f, size); err == nil {
			version = h.Version()
		}
		msg = fmt.Sprintf("Device %s already contains LUKS%d header. Replacing header will destroy existing keyslots.", hp, version)
	}
	if !confirm(c, msg) {
		return errAborted(exitParams, "")
	}
	if err := luks2.Restore(f, size, b, bsize); err != nil {
		return headerError(hp, err)
	}
	return syncHeader(f)
}
