package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/keyring/vault"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// keyFlags select where a passphrase comes from and which header and
// keyslot it opens, with cryptsetup's names.
var keyFlags = []cli.Flag{
	&cli.StringFlag{Name: "key-file", Aliases: []string{"d"}, Usage: "read the passphrase from `FILE` (- = standard input)"},
	&cli.Int64Flag{Name: "keyfile-offset", Usage: "skip `BYTES` at the start of the key file"},
	&cli.Int64Flag{Name: "keyfile-size", Aliases: []string{"l"}, Usage: "read at most `BYTES` from the key file"},
	&cli.IntFlag{Name: "key-slot", Aliases: []string{"S"}, Value: -1, Usage: "use only key slot `NUM`"},
	&cli.IntFlag{Name: "tries", Aliases: []string{"T"}, Value: 3, Usage: "how often the passphrase may be retyped on a terminal"},
	&cli.UintFlag{Name: "timeout", Aliases: []string{"t"}, Usage: "give up on a passphrase prompt after `SECONDS` (0: wait)"},
	&cli.StringFlag{Name: "key-source", Usage: "read the passphrase from a key server: vault:`PATH`[?field=F&format=hex|text] (Vault's VAULT_* settings)"},
	headerFlag,
}

// volume is an unlocked LUKS volume: its header and data segment and the
// volume key in locked memory.
type volume struct {
	Path       string // data device
	HeaderPath string // where the header lives (Path unless --header)
	Header     *luks2.Header
	Segment    luks2.Segment
	Key        *keyring.Secret
	Slot       int // the keyslot that opened
	// Reencrypting are the data segments of a volume in reencryption
	// (Segment is then the final one); v.Key holds the old key (of
	// oldKeySize bytes), then the new one. See reencrypt_open.go.
	Reencrypting []luks2.MappedSegment
	oldKeySize   int
}

// Close wipes the volume key.
func (v *volume) Close() {
	if v != nil {
		v.Key.Wipe()
	}
}

// spec describes the unlocked volume to the daemon as the mapping name,
// exposed as opts say. Whether discards pass is decided here, once: the
// option, or the header's persistent allow-discards flag.
func (v *volume) spec(name string, opts daemon.Options) daemon.Spec {
	opts.AllowDiscards = opts.AllowDiscards || slices.Contains(v.Header.Flags(), "allow-discards")
	seg := v.Segment
	return daemon.Spec{
		Name:     name,
		Location: v.Path,
		Header:   v.HeaderPath,
		Type:     fmt.Sprintf("LUKS%d", v.Header.Version()),
		UUID:     v.Header.UUID(),
		KeySlot:  v.Slot,
		Segment: daemon.Segment{
			Cipher:     seg.Cipher,
			Offset:     seg.Offset,
			Size:       seg.Size,
			SectorSize: seg.SectorSize,
			KeySize:    seg.KeySize,
		},
		Segments: v.reencryptSegments(),
		Options:  opts,
	}
}

// verbosef prints a line on standard output with -v, as cryptsetup's
// log_verbose.
func verbosef(c *cli.Context, format string, a ...any) {
	if c.Bool("verbose") {
		fmt.Printf(format+"\n", a...)
	}
}

// keySource returns the passphrase source the key flags describe.
func keySource(c *cli.Context) keyring.Source {
	src := keyring.Source{
		KeyFile: c.String("key-file"),
		Offset:  c.Int64("keyfile-offset"),
		Size:    c.Int64("keyfile-size"),
		Timeout: time.Duration(c.Uint("timeout")) * time.Second,
	}
	if ks := c.String("key-source"); ks != "" {
		src.Fetch = func() (*keyring.Secret, error) {
			l, err := vault.ParseLocation(ks)
			if err != nil {
				return nil, err
			}
			return l.Read(context.Background())
		}
	}
	return src
}

// readPassphrase reads a passphrase from src, mapping its errors to
// cryptsetup's exit codes.
func readPassphrase(src keyring.Source, prompt string, verify bool) (*keyring.Secret, error) {
	k, err := src.Passphrase(prompt, verify)
	if errors.Is(err, keyring.ErrMismatch) {
		return nil, withCode(exitPermission, err)
	}
	return k, withCode(exitParams, err)
}

// headerPath returns the device holding path's header.
func headerPath(c *cli.Context, path string) string {
	if h := c.String("header"); h != "" {
		return h
	}
	return path
}

// openDevice opens a device or image file at path, a location that
// blockdev.OpenPath takes, or a remote volume, returning it and its size.
// Failures carry cryptsetup's messages and exit code 4.
func openDevice(path string, write bool) (luks2.File, int64, error) {
	if blockdev.Scheme(path) != "" {
		return openRemote(path, write)
	}
	f, size, err := blockdev.OpenPath(path, write)
	if err != nil {
		return nil, 0, locationError(path, err)
	}
	return f, size, nil
}

// locationError maps blockdev's refusal to open path to cryptsetup's
// message (exit 4). A URL no backend takes, or an nbds:// one whose
// certificate directory cannot be read (exit 1), is luksd's own.
func locationError(path string, err error) error {
	if cerr := certDirError(path, err); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, blockdev.ErrUnknownScheme):
		return exitf(exitDevice, "luksd: %v", err)
	case errors.Is(err, blockdev.ErrNotDevice):
		return exitf(exitDevice, "Device %s is not compatible.", path)
	case errors.Is(err, blockdev.ErrNoSize):
		return exitf(exitDevice, "Cannot get info about device %s.", path)
	case blockdev.Scheme(path) != "" && errors.Is(err, os.ErrPermission):
		// A store that refuses our credentials (or has none from us).
		return exitf(exitPermission, "luksd: %v", err)
	case blockdev.Scheme(path) != "" && !errors.Is(err, os.ErrNotExist):
		return exitf(exitDevice, "luksd: %v", err)
	}
	return exitf(exitDevice, "Device %s does not exist or access denied.", path)
}

// readHeader opens and reads the LUKS header of path (or --header) under
// the shared metadata lock. It returns the open header device; the caller
// closes it.
func readHeader(c *cli.Context, path string, write bool) (*luks2.Header, *headerDevice, error) {
	hp := headerPath(c, path)
	d, err := openHeaderDevice(c, hp, write)
	if err != nil {
		return nil, nil, err
	}
	h, err := d.read()
	if err != nil {
		d.Close()
		return nil, nil, headerError(hp, err)
	}
	return h, d, nil
}

// readLUKS2Header is readHeader for the LUKS2-only verbs (token,
// luksConvertKey): anything else is cryptsetup's "not a valid LUKS2 device".
func readLUKS2Header(c *cli.Context, path string, write bool) (*luks2.Header, *headerDevice, error) {
	h, d, err := readHeaderQuietly(c, path, write)
	if err == nil && h.Version() == 2 {
		return h, d, nil
	}
	if d != nil {
		d.Close()
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.code == exitDevice {
		return nil, nil, err
	}
	return nil, nil, exitf(exitParams, "Device %s is not a valid LUKS2 device.", headerPath(c, path))
}

// readHeaderQuietly is readHeader that prints nothing but headerPreface's
// lines about a header it cannot load (readLUKS2Header says more).
func readHeaderQuietly(c *cli.Context, path string, write bool) (*luks2.Header, *headerDevice, error) {
	hp := headerPath(c, path)
	d, err := openHeaderDevice(c, hp, write)
	if err != nil {
		return nil, nil, err
	}
	d.LUKS2Only = true
	h, err := d.read()
	if err != nil {
		d.Close()
		printPreface(hp, err)
		return nil, nil, withCode(exitParams, err)
	}
	return h, d, nil
}

// readHeaderOfType is readHeader for verbs where --type names the header
// versions they may use, as in cryptsetup: a header of another version, or
// any header for a type that is not LUKS (plain, luks3), is "not a valid
// LUKS device".
func readHeaderOfType(c *cli.Context, path string, write bool) (*luks2.Header, *headerDevice, error) {
	h, f, err := readHeader(c, path, write)
	if err != nil {
		return nil, nil, err
	}
	if !typeAdmits(c.String("type"), h.Version()) {
		f.Close()
		return nil, nil, headerError(headerPath(c, path), luks2.ErrNotLUKS)
	}
	return h, f, nil
}

// typeAdmits reports whether --type t admits a header of LUKS version, as
// cryptsetup 2.6.1 compares them: "" and "luks" take either version,
// "luks1"/"LUKS1" and "luks2"/"LUKS2" their own (no other spelling), any
// other type none.
func typeAdmits(t string, version int) bool {
	switch t {
	case "", "luks":
		return true
	case "luks1", "LUKS1":
		return version == 1
	case "luks2", "LUKS2":
		return version == 2
	}
	return false
}

// headerError maps a luks2 error about the header of path to cryptsetup's
// message and exit code.
func headerError(path string, err error) error {
	var lock *luks2.LockError
	if errors.As(err, &lock) {
		return lockError(err)
	}
	printPreface(path, err)
	var invalidSlot *luks2.KeyslotInvalidError
	var tooSmall1 *luks2.LUKS1TooSmallError
	switch {
	case errors.Is(err, luks2.ErrNotLUKS):
		return exitf(exitParams, "Device %s is not a valid LUKS device.", path)
	case errors.Is(err, luks2.ErrUnmetRequirements):
		return exitf(exitParams, "Unmet LUKS2 requirements detected.")
	case errors.Is(err, luks2.ErrReencryption):
		return exitf(exitParams, "Operation incompatible with device marked for LUKS2 reencryption. Aborting.")
	case errors.Is(err, luks2.ErrLegacyReencryption):
		return exitf(exitParams, "Operation incompatible with device marked for legacy reencryption. Aborting.")
	case errors.Is(err, luks2.ErrOutOfMemory):
		return exitf(exitMemory, "Not enough available memory to open a keyslot.")
	case errors.Is(err, luks2.ErrKeyslotOpen):
		return exitf(exitParams, "Keyslot open failed.")
	case errors.Is(err, luks2.ErrNoKeyslotSpace):
		return exitf(exitParams, "No space for new keyslot.")
	case errors.Is(err, luks2.ErrWrongPassphrase):
		return exitf(exitPermission, "No key available with this passphrase.")
	case errors.Is(err, luks2.ErrNoUsableKeyslot):
		return exitf(exitParams, "No usable keyslot is available.")
	case errors.Is(err, luks2.ErrNoFreeSlot):
		return exitf(exitParams, "All key slots full.")
	case errors.Is(err, luks2.ErrVolumeKeyMismatch):
		return exitf(exitPermission, "Volume key does not match the volume.")
	case errors.Is(err, luks2.ErrLUKS1PBKDF):
		return exitf(exitParams, "Requested PBKDF type is not supported for LUKS1.")
	case errors.Is(err, luks2.ErrConcurrentUpdate):
		return exitf(exitParams, "Detected attempt for concurrent LUKS2 metadata update. Aborting operation.")
	case errors.As(err, &invalidSlot):
		return exitf(exitParams, "%v.", err) // cryptsetup's words, which end with a full stop
	case errors.As(err, &tooSmall1):
		return exitf(exitParams, "Device is too small. (LUKS1 requires at least %d bytes.)", tooSmall1.Need)
	}
	return withCode(exitParams, err)
}

// headerPreface is what cryptsetup says about a header it cannot load
// before it says that the device is not a valid LUKS device.
func headerPreface(path string, err error) []string {
	var tooSmall *luks2.TooSmallError
	var version *luks2.VersionError
	var read *luks2.ReadError
	switch {
	case errors.As(err, &read):
		return []string{fmt.Sprintf("Cannot read device %s: %v.", path, strings.TrimSuffix(read.Err.Error(), "."))}
	case errors.As(err, &version):
		return []string{fmt.Sprintf("Unsupported LUKS version %d.", version.Version)}
	case errors.As(err, &tooSmall):
		return []string{fmt.Sprintf("Device %s is too small. Need at least %d bytes.", path, tooSmall.Need)}
	case errors.Is(err, luks2.ErrAmbiguous):
		return []string{"Device contains ambiguous signatures, cannot auto-recover LUKS2.",
			`Please run "cryptsetup repair" for recovery.`}
	}
	return nil
}

// printPreface prints headerPreface's lines on standard error.
func printPreface(path string, err error) {
	for _, l := range headerPreface(path, err) {
		fmt.Fprintln(os.Stderr, l)
	}
}

// headerErrorOrNil is headerError for an error that may be nil.
func headerErrorOrNil(path string, err error) error {
	if err == nil {
		return nil
	}
	return headerError(path, err)
}

// unlockWith asks src for a passphrase until one opens a keyslot of h
// (retry: up to --tries times on a terminal, as open does). It returns the
// volume key and the slot.
func unlockWith(c *cli.Context, h *luks2.Header, dev io.ReaderAt, src keyring.Source, prompt string, slot int, retry bool) (*keyring.Secret, int, error) {
	active := h.ActiveKeyslots()
	if len(active) == 0 || slot >= 0 && !slices.Contains(active, slot) {
		return nil, 0, exitf(exitParams, "No usable keyslot is available.")
	}
	tries := 1
	if retry && src.Interactive() && c.Int("tries") > 1 {
		tries = c.Int("tries")
	}
	for try := 1; ; try++ {
		pass, err := readPassphrase(src, prompt, false)
		if err != nil {
			return nil, 0, err
		}
		unlock := h.Unlock
		if c.Bool("unbound") && !c.Bool("dump-volume-key") {
			// open --test-passphrase --unbound, luksDump --unbound: unbound
			// keys count too (luksDump --dump-volume-key outranks --unbound).
			unlock = h.UnlockUnbound
		}
		vk, got, err := unlock(dev, pass.Bytes(), slot)
		pass.Wipe()
		if err == nil {
			key, err := keyring.FromBytes(vk)
			if err != nil {
				return nil, 0, withCode(exitMemory, err)
			}
			return key, got, nil
		}
		if !errors.Is(err, luks2.ErrWrongPassphrase) || try >= tries {
			return nil, 0, headerError(headerPath(c, ""), err)
		}
		fmt.Fprintln(os.Stderr, "No key available with this passphrase.")
	}
}

// unlockVolume reads path's header (or --header's), asks for the
// passphrase as cryptsetup does ("Enter passphrase for PATH: ", --tries on
// a terminal, --key-file and friends otherwise) and unlocks a keyslot
// (--key-slot restricts which). readOnly: the caller will not write the
// data device, so its existence is checked read-only.
func unlockVolume(c *cli.Context, path string, readOnly bool) (*volume, error) {
	return unlockVolumeSlot(c, path, readOnly, c.Int("key-slot"), true)
}

// unlockVolumeSlot is unlockVolume with the keyslot restriction given
// (-1: any) and retries on a terminal or not, for verbs where cryptsetup
// ignores --key-slot or asks once.
func unlockVolumeSlot(c *cli.Context, path string, readOnly bool, slot int, retry bool) (*volume, error) {
	return unlockKeyslot(c, path, readOnly, slot, retry, true)
}

// unlockKeyslot is unlockVolumeSlot; forActivation, the data segment must
// be one luksd can map (checked before the passphrase is asked for), else
// only the keyslot matters (open --test-passphrase, luksDump
// --dump-volume-key work where cryptsetup's do, as on a volume it is
// reencrypting), and the volume's Segment is left empty.
func unlockKeyslot(c *cli.Context, path string, readOnly bool, slot int, retry, forActivation bool) (*volume, error) {
	if path == "" {
		return nil, exitf(exitParams, "Command requires device as argument.")
	}
	if err := checkDataDevice(c, path, readOnly); err != nil {
		return nil, err
	}
	h, f, err := readHeaderOfType(c, path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unlockHeader(c, path, h, f, slot, retry, forActivation)
}

// checkDataDevice checks, when the header is detached (--header), that
// the data device path opens (for writing unless readOnly).
func checkDataDevice(c *cli.Context, path string, readOnly bool) error {
	if headerPath(c, path) == path {
		return nil
	}
	d, _, err := openDevice(path, !readOnly)
	if err != nil {
		return err
	}
	return d.Close()
}

// unlockHeader is unlockKeyslot for the header h of path, already read
// from f (open reads it once, before it asks for anything).
func unlockHeader(c *cli.Context, path string, h *luks2.Header, f *headerDevice, slot int, retry, forActivation bool) (*volume, error) {
	var seg luks2.Segment
	var err error
	if forActivation {
		if seg, err = h.Segment(); err != nil && h.InReencryption() {
			return unlockReencrypting(c, path, slot, retry)
		} else if err != nil {
			return nil, segmentError(headerPath(c, path), err)
		}
	}
	if !forActivation && slot >= 0 && errors.Is(h.Requirements(), luks2.ErrReencryption) {
		// cryptsetup tests the passphrase by activating through the
		// keyslot, which cannot hold both keys of a reencryption: it fails
		// without a word.
		return nil, exitf(exitParams, "")
	}
	key, slot, err := unlockHeaderKey(c, path, h, f, slot, retry)
	if err != nil {
		return nil, err
	}
	verbosef(c, "Key slot %d unlocked.", slot)
	return &volume{
		Path:       path,
		HeaderPath: headerPath(c, path),
		Header:     h,
		Segment:    seg,
		Key:        key,
		Slot:       slot,
	}, nil
}

// segmentError maps a refused data segment: cryptsetup's words for the
// requirements it knows, luksd's reason otherwise.
func segmentError(path string, err error) error {
	if errors.Is(err, luks2.ErrUnmetRequirements) || errors.Is(err, luks2.ErrLegacyReencryption) {
		return headerError(path, err)
	}
	return withCode(exitParams, err)
}
