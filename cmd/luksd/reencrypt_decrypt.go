package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// reencrypt --decrypt, as cryptsetup 2.6.1 runs it offline. With --header
// NEWFILE that does not exist yet, a volume whose header is on the data
// device is decrypted in place: the header goes to NEWFILE and the data
// moves to the start of the device (luks2.DecryptInit). A decryption
// under way is resumed with --header FILE, as any reencryption.

// reencryptWithHeader runs reencrypt --decrypt, reencrypt --header on a
// decryption under way, and a data shift (--reduce-device-size) with a
// detached header; the rest with --header luksd refuses.
func reencryptWithHeader(c *cli.Context, dev string) error {
	if st, err := activeVolume(dev); err != nil {
		return err
	} else if st != nil && c.Bool("decrypt") {
		// The daemon would have to serve a device whose data moves under
		// it and ends as no LUKS volume at all.
		return exitf(exitParams, "Online decryption is not supported by luksd: close %s and decrypt it offline.", st.Name)
	} else if st != nil {
		return reencryptOnline(c, st)
	}
	claim, err := claimExclusive(dev)
	if err != nil {
		return err
	}
	if claim != nil {
		defer claim.Close()
	}
	hp := c.String("header")
	if hp == "" {
		return exitf(exitParams, "LUKS2 decryption requires --header option.")
	}
	// A header location that does not exist (a local path; a remote one
	// is read as it is) is where --decrypt exports the device's header.
	_, err = os.Stat(hp)
	if errors.Is(err, os.ErrNotExist) && blockdev.Scheme(hp) == "" {
		if c.Bool("resume-only") {
			return exitf(exitParams, "Device reencryption not in progress.")
		}
		if c.Bool("decrypt") {
			return decryptInit(c, dev, hp)
		}
	}
	h, f, err := readLUKS2Header(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if c.Bool("resume-only") && !h.InReencryption() {
		return exitf(exitParams, "Device reencryption not in progress.")
	}
	if c.Bool("encrypt") && !h.InReencryption() {
		return checkReencryptMode(c, h, dev)
	}
	if h.ReencryptMode() == "encrypt" && h.ReencryptResilience() != "datashift" {
		if err := checkReencryptMode(c, h, dev); err != nil {
			return err
		}
		return resumeDetached(c, h, f, dev, hp) // reencrypt_encrypt_header.go
	}
	if h.ReencryptMode() != "decrypt" {
		if c.Bool("decrypt") && !h.InReencryption() {
			// An existing header is decrypted in place only when it is
			// detached: not the device's own, its data at offset 0.
			if h.DataOffset() != 0 || sameDevice(hp, dev) {
				return exitf(exitParams, "LUKS2 decryption is supported with detached header device only (with data offset set to 0).")
			}
			return decryptDetachedInit(c, h, f, dev) // reencrypt_decrypt_header.go
		}
		if h.ReencryptMode() == "reencrypt" && h.ReencryptResilience() == "datashift" {
			if err := checkReencryptMode(c, h, dev); err != nil {
				return err
			}
			if err := checkResumeResilience(c, h); err != nil {
				return err
			}
			return resumeDetached(c, h, f, dev, hp) // reencrypt_encrypt_header.go
		}
		if !h.InReencryption() && c.IsSet("reduce-device-size") { // --decrypt returned above
			return reencryptShiftDetached(c, h, f, dev, hp) // reencrypt_shift.go
		}
		return exitf(exitParams, "Option --header is not supported by luksd reencrypt.")
	}
	if err := checkReencryptMode(c, h, dev); err != nil {
		return err
	}
	if c.Bool("init-only") {
		return exitf(exitParams, "LUKS2 reencryption already initialized. Aborting operation.")
	}
	if c.IsSet("resilience") && c.String("resilience") != "checksum" && c.String("resilience") != "journal" {
		return exitf(exitParams, "Requested --resilience option cannot be applied to current reencryption operation.")
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
	return runDecrypt(c, h, f, dev, pass.Bytes())
}

// sameDevice reports whether the paths a and b name one file or block
// device (through links, or two nodes of one device), or one remote
// location.
func sameDevice(a, b string) bool {
	if blockdev.Scheme(a) != "" || blockdev.Scheme(b) != "" {
		return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return false
	}
	if os.SameFile(sa, sb) {
		return true
	}
	ra, okA := sa.Sys().(*syscall.Stat_t)
	rb, okB := sb.Sys().(*syscall.Stat_t)
	return okA && okB && sa.Mode()&os.ModeDevice != 0 && sb.Mode()&os.ModeDevice != 0 &&
		sa.Mode()&os.ModeCharDevice == 0 && sb.Mode()&os.ModeCharDevice == 0 && ra.Rdev == rb.Rdev
}

// decryptInit exports dev's header to hp and starts the decryption, then
// runs it unless --init-only.
func decryptInit(c *cli.Context, dev, hp string) error {
	if c.Int64("device-size") > 0 {
		// Refused here, before the header is exported: a run refuses it
		// only after the data's first hotzone moved.
		return exitf(exitParams, "Option --device-size with a data shift is not supported by luksd.")
	}
	switch c.String("resilience") {
	case "", "checksum", "journal", "datashift-checksum", "datashift-journal":
	case "datashift", "none":
		return exitf(exitParams, "Requested --resilience option cannot be applied to current reencryption operation.")
	default:
		return exitf(exitParams, "Unsupported resilience mode %s", c.String("resilience"))
	}
	f, err := openHeaderDevice(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := f.read()
	if err != nil || h.Version() != 2 || h.InReencryption() {
		return exitf(exitParams, "Device %s does not exist or access denied.", hp)
	}
	if !confirm(c, fmt.Sprintf("Header file %s does not exist. Do you want to initialize LUKS2 decryption of device %s and export LUKS2 header to file %s?", hp, dev, hp)) {
		return errAborted(exitParams, "Operation aborted.")
	}
	pass, err := readPassphrase(keySource(c), "Enter passphrase for "+dev+": ", false)
	if err != nil {
		return err
	}
	defer pass.Wipe()
	slot := c.Int("key-slot")
	if _, _, err := h.Unlock(f, pass.Bytes(), slot); err != nil {
		return headerError(dev, err)
	}
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	nf, err := os.OpenFile(hp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return exitf(exitParams, "Cannot create header backup file %s.", hp)
	}
	hf := &headerDevice{&luks2.HeaderFile{File: nf, Path: hp}}
	defer hf.Close()
	p := luks2.DecryptParams{Resilience: decryptResilience(c.String("resilience")), Hash: c.String("resilience-hash"),
		MovedSize: c.Int64("hotzone-size"), BlockSize: dataBlockSize(f.File)}
	err = nf.Truncate(h.DecryptExportSize())
	if err == nil {
		err = f.edit(func() error { return h.DecryptInit(f, hf, f.Size, pass.Bytes(), slot, p) })
	}
	if err != nil {
		os.Remove(hp)
		switch {
		case errors.Is(err, luks2.ErrMovedOverShift):
			fmt.Fprintln(os.Stderr, "Moved segment size can not be greater than data shift value.")
		case errors.Is(err, luks2.ErrMovedTooLarge):
			fmt.Fprintf(os.Stderr, "M%v.\n", err.Error()[1:])
		case errors.Is(err, luks2.ErrUnsupported):
			return withCode(exitParams, err)
		default:
			verbosef(c, "%v", err)
		}
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	}
	if c.Bool("init-only") {
		return nil
	}
	hf.Size = h.DecryptExportSize()
	nh, err := hf.read()
	if err != nil {
		return headerError(hp, err)
	}
	return runDecrypt(c, nh, hf, dev, pass.Bytes())
}

// decryptResilience is the moved part's resilience --resilience names.
func decryptResilience(r string) string {
	switch r {
	case "journal", "datashift-journal":
		return "journal"
	}
	return "checksum"
}

// dataBlockSize is cryptsetup's block size of the data device: the file
// system's block size for an image file (at most 4096), the logical
// block size of a block device.
func dataBlockSize(f luks2.File) int {
	if of, ok := f.(*os.File); ok {
		st, err := of.Stat()
		if err == nil && st.Mode().IsRegular() {
			var fs unix.Statfs_t
			if unix.Fstatfs(int(of.Fd()), &fs) == nil && fs.Bsize > 0 {
				return int(min(fs.Bsize, 4096))
			}
		} else if n, err := unix.IoctlGetInt(int(of.Fd()), unix.BLKSSZGET); err == nil && n > 0 {
			return n
		}
	}
	return 4096
}

// deviceBlockSize is dataBlockSize of the data device d.
func deviceBlockSize(d luks2.DataDevice) int {
	if s, ok := d.(syncedFile); ok {
		d = s.File
	}
	if f, ok := d.(luks2.File); ok {
		return dataBlockSize(f)
	}
	return 4096
}

// runDecrypt runs the marked decryption (header f) of the data on dev.
func runDecrypt(c *cli.Context, h *luks2.Header, f *headerDevice, dev string, pass []byte) error {
	data, size, err := openDevice(dev, true)
	if err != nil {
		return err
	}
	defer data.Close()
	return runReencrypt(c, h, f, f.Path, pass, syncedFile{data}, size)
}
