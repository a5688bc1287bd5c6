package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

var headerBackupFlags = []cli.Flag{
	&cli.StringFlag{Name: "header-backup-file", Usage: "header backup `FILE`"},
	headerFlag,
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

// backupArgs returns the device and --header-backup-file, or cryptsetup's
// error.
func backupArgs(c *cli.Context) (dev, path string, err error) {
	if dev, err = oneDevice(c); err != nil {
		return "", "", err
	}
	if path = c.String("header-backup-file"); path == "" {
		return "", "", exitf(exitParams, "Option --header-backup-file is required.")
	}
	return dev, path, nil
}

func luksHeaderBackup(c *cli.Context) error {
	dev, path, err := backupArgs(c)
	if err != nil {
		return err
	}
	hp := headerPath(c, dev)
	_, f, err := readHeader(c, dev, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := os.Lstat(path); err == nil {
		return exitf(exitParams, "Requested header backup file %s already exists.", path)
	}
	// cryptsetup creates the backup read-only for its owner.
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return exitf(exitParams, "Cannot create header backup file %s.", path)
	}
	err = f.locked(false, func() error { return luks2.Backup(f, f.Size, out) })
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
	dev, path, err := backupArgs(c)
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
	f, err := openHeaderDevice(c, hp, true)
	if err != nil {
		return err
	}
	defer f.Close()
	check, err := luks2.CheckRestore(f, f.Size, b, bsize)
	if check.OtherVersion != 0 {
		// cryptsetup reads the device as LUKS1 and says why it is not.
		fmt.Fprintf(os.Stderr, "Unsupported LUKS version %d.\n", check.OtherVersion)
	}
	if err != nil {
		return restoreError(hp, path, check.Version, err)
	}
	if !confirm(c, restoreQuestion(hp, check)) {
		return errAborted(exitParams, "")
	}
	err = f.edit(func() error {
		if err := luks2.Restore(f, f.Size, b, bsize); err != nil {
			return restoreError(hp, path, check.Version, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if check.Version == 1 {
		// cryptsetup reloads the restored LUKS1 header and, with -v, says
		// it checked it.
		verbosef(c, "No known problems detected for LUKS header.")
	}
	return nil
}

// restoreQuestion is what cryptsetup asks before it restores a header
// over device hp, as check found it.
func restoreQuestion(hp string, check luks2.RestoreCheck) string {
	// cryptsetup's LUKS1 restore says "LUKS header", its LUKS2 one "LUKS2
	// header".
	kind := "LUKS"
	if check.Version == 2 {
		kind = "LUKS2"
	}
	msg := fmt.Sprintf("Device %s does not contain %s header. Replacing header can destroy data on that device.", hp, kind)
	if check.Replaces {
		msg = fmt.Sprintf("Device %s already contains %s header. Replacing header will destroy existing keyslots.", hp, kind)
	}
	if check.UUIDDiffers {
		msg += "\nWARNING: real device header has different UUID than backup!"
	}
	if check.UnknownRequirements {
		msg += "\nWARNING: unknown LUKS2 requirements detected in real device header!" +
			"\nReplacing header with backup may corrupt the data on that device!"
	}
	if check.OfflineReencryption {
		msg += "\nWARNING: Unfinished offline reencryption detected on the device!" +
			"\nReplacing header with backup may corrupt data."
	}
	if check.Version == 1 && len(msg) > luks1RestoreMsgMax {
		// cryptsetup's LUKS1 restore builds the question in a 200-byte
		// buffer: a long path cuts the UUID warning short.
		msg = msg[:luks1RestoreMsgMax]
	}
	return msg
}

// luks1RestoreMsgMax is the longest question cryptsetup 2.6.1's LUKS1
// luksHeaderRestore asks (checked with a long image path).
const luks1RestoreMsgMax = 199

// restoreError maps luks2.Restore's refusals of backupPath to cryptsetup's
// messages for a backup of LUKS version.
func restoreError(path, backupPath string, version int, err error) error {
	switch {
	case errors.Is(err, luks2.ErrRestoreRequirements):
		return exitf(exitParams, "Forbidden LUKS2 requirements detected in backup %s.", backupPath)
	case errors.Is(err, luks2.ErrRestoreDataOffset) && version == 1:
		return exitf(exitParams, "Data offset or key size differs on device and backup, restore failed.")
	case errors.Is(err, luks2.ErrRestoreDataOffset):
		return exitf(exitParams, "Data offset differ on device and backup, restore failed.")
	case errors.Is(err, luks2.ErrRestoreAreaSize):
		return exitf(exitParams, "Binary header with keyslot areas size differ on device and backup, restore failed.")
	}
	return headerError(path, err)
}
