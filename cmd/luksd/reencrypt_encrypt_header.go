package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// reencrypt --encrypt --header HDR DEVICE, as cryptsetup 2.6.1 runs it
// offline: a new LUKS2 header goes to HDR (created when it does not
// exist) and the data is encrypted where it is, from offset 0 forward
// (luks2.EncryptInitDetached); then the encryption runs as any
// reencryption, and resumes with --header HDR.

// reencryptEncryptDetached starts encrypting the plain device dev with its
// header on --header and, unless --init-only, runs the encryption.
func reencryptEncryptDetached(c *cli.Context, dev string) error {
	hp := c.String("header")
	if c.NArg() > 1 {
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
	if opts.DataOffset != 0 {
		return exitf(exitParams, "Option --offset with --encrypt --header is not supported by luksd.")
	}
	if opts.UUID == "" {
		if opts.UUID, err = luks2.NewUUID(); err != nil {
			return err
		}
	}
	params := luks2.ReencryptParams{Resilience: c.String("resilience"), Hash: c.String("resilience-hash")}
	switch params.Resilience {
	case "", "checksum", "journal", "none":
	case "datashift", "datashift-checksum", "datashift-journal":
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	default:
		fmt.Fprintf(os.Stderr, "Unsupported resilience mode %s\n", params.Resilience)
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	}
	for _, p := range []string{dev, hp} {
		claim, err := claimExclusive(p)
		if err != nil {
			return err
		}
		if claim != nil {
			defer claim.Close()
		}
	}
	df, size, err := openDevice(dev, true)
	if err != nil {
		return err
	}
	defer df.Close()
	data := &headerDevice{&luks2.HeaderFile{File: df, Path: dev, Size: size, LockName: remoteLockName(dev)}}
	if err := refuseLUKSData(df, size, dev); err != nil {
		return err
	}
	msg := fmt.Sprintf("This will overwrite data on %s irrevocably.", hp)
	if _, err := os.Stat(hp); errors.Is(err, os.ErrNotExist) {
		msg = "Header file does not exist, do you want to create it?"
	}
	if !confirm(c, msg) {
		return errAborted(exitParams, "Operation aborted.")
	}
	pass, err := readPassphrase(keySource(c), fmt.Sprintf("Enter passphrase for %s: ", hp), true)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	// cryptsetup writes a header with no keyslot to HDR first; luksd
	// writes nothing.
	if err := checkDeviceSize(c, size, opts.SectorSize); err != nil {
		return err
	}
	hdrSize, err := luks2.EncryptHeaderSize(opts)
	if err != nil {
		return withCode(exitParams, err)
	}
	nf, err := os.OpenFile(hp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return exitf(exitParams, "Device %s does not exist or access denied.", hp)
	}
	if st, err := nf.Stat(); err == nil && st.Mode().IsRegular() && st.Size() < hdrSize {
		if err := nf.Truncate(hdrSize); err != nil {
			nf.Close()
			return exitf(exitDevice, "Cannot write header to %s: %v", hp, err)
		}
	}
	nf.Close()
	hf, err := openHeaderDevice(c, hp, true)
	if err != nil {
		return err
	}
	defer hf.Close()
	err = hf.edit(func() error {
		return luks2.EncryptInitDetached(hf, size, opts, pass.Bytes(), params, dataBlockSize(data.File))
	})
	if err := initFailure(c, dev, err); err != nil || c.Bool("init-only") {
		return err
	}
	return runJustMarked(c, hf, hp, pass.Bytes(), syncedFile{df}, size)
}

// resumeDetached resumes the encryption (without a data shift) or the
// reencryption with a data shift of dev whose detached header hp (h, on
// f) is marked for it.
func resumeDetached(c *cli.Context, h *luks2.Header, f *headerDevice, dev, hp string) error {
	if c.Bool("init-only") {
		return exitf(exitParams, "LUKS2 reencryption already initialized. Aborting operation.")
	}
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	pass, err := resumePassphrase(c, hp)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	df, size, err := openDevice(dev, true)
	if err != nil {
		return err
	}
	defer df.Close()
	return runReencrypt(c, h, f, hp, pass.Bytes(), syncedFile{df}, size)
}

// refuseLUKSData refuses, in cryptsetup 2.6.1's words, to encrypt a data
// device (f, size bytes) that holds a LUKS header already: one marked for
// reencryption is named so.
func refuseLUKSData(f luks2.File, size int64, dev string) error {
	if !luks2.IsLUKS(f) {
		return nil
	}
	if h, err := luks2.ReadLUKS2(f, size); err == nil && h.InReencryption() {
		return exitf(exitParams, "Device %s is already in LUKS reencryption. Aborting operation.", dev)
	}
	return exitf(exitParams, "Device %s is already LUKS device. Aborting operation.", dev)
}
