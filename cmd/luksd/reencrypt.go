package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "reencrypt",
		Usage:     "change a LUKS2 volume's volume key, cipher or sector size in place, offline or online (a volume luksd has open)",
		ArgsUsage: "<device>",
		Flags: flagSet(keyFlags, encryptFlags, []cli.Flag{
			&cli.StringFlag{Name: "cipher", Aliases: []string{"c"}, Usage: "new cipher `SPEC`"},
			&cli.IntFlag{Name: "key-size", Aliases: []string{"s"}, Usage: "new volume key size in `BITS`"},
			&cli.IntFlag{Name: "sector-size", Usage: "new encryption sector size in `BYTES`"},
			&cli.StringFlag{Name: "resilience", Usage: "hotzone protection: checksum (default), journal or none"},
			&cli.StringFlag{Name: "resilience-hash", Usage: "checksum `HASH` (default sha256)"},
			&cli.Int64Flag{Name: "hotzone-size", Usage: "most `BYTES` rewritten per step"},
			&cli.Int64Flag{Name: "device-size", Usage: "reencrypt only the first `BYTES` of data (units as cryptsetup's)"},
			&cli.BoolFlag{Name: "keep-key", Usage: "refused: luksd always makes a new volume key"},
			&cli.BoolFlag{Name: "init-only", Usage: "only mark the volume for reencryption"},
			&cli.BoolFlag{Name: "resume-only", Usage: "only resume a reencryption already marked"},
			&cli.BoolFlag{Name: "force-offline-reencrypt", Usage: "accepted; luksd reencrypts unopened devices offline anyway"},
			&cli.StringFlag{Name: "active-name", Usage: "reencrypt online through the luksd volume `NAME`, which must map the device"},
			&cli.IntFlag{Name: "progress-frequency", Usage: "print progress every `SECONDS`"},
			&cli.BoolFlag{Name: "progress-json", Usage: "print progress as JSON lines"},
		}),
		Action: func(c *cli.Context) error { return reencryptDeviceExit(reencrypt(c)) },
	})
}

// reencryptDeviceExit gives a device that does not exist or is no device
// (a directory) cryptsetup 2.6.1 reencrypt's exit code, 1, where its other
// actions exit with 4; the message stays.
func reencryptDeviceExit(err error) error {
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitDevice {
		return err
	}
	msg := ee.Error()
	if strings.HasPrefix(msg, "Device ") && (strings.HasSuffix(msg, " does not exist or access denied.") || strings.HasSuffix(msg, " is not compatible.")) ||
		strings.HasPrefix(msg, "Cannot get info about device ") {
		return exitf(exitParams, "%s", msg)
	}
	return err
}

// markedHeader is the LUKS2 header of dev (or --header) when it is marked
// for reencryption, else nil (also when it cannot be read). A remote
// location is read only for the checks that need it (--keep-key,
// --decrypt, --encrypt with --init-only), not to connect to it twice on
// every run.
func markedHeader(c *cli.Context, dev string) *luks2.Header {
	hp := headerPath(c, dev)
	if blockdev.Scheme(hp) != "" && !c.Bool("keep-key") && !c.Bool("decrypt") && !(c.Bool("encrypt") && c.Bool("init-only")) {
		return nil
	}
	f, size, err := openDevice(hp, false)
	if err != nil {
		return nil
	}
	defer f.Close()
	if h, err := luks2.ReadLUKS2(f, size); err == nil && h.InReencryption() {
		return h
	}
	return nil
}

// checkResumeResilience refuses, with cryptsetup 2.6.1's words and before
// the passphrase, a --resilience the reencryption under way in h cannot
// switch to.
func checkResumeResilience(c *cli.Context, h *luks2.Header) error {
	switch r := c.String("resilience"); r {
	case "", "checksum", "journal", "none":
		return nil
	case "datashift":
		if h.ReencryptResilience() == "datashift" {
			return nil
		}
		return exitf(exitParams, "Requested --resilience option cannot be applied to current reencryption operation.")
	default:
		return exitf(exitParams, "Unsupported resilience mode %s", r)
	}
}

// checkReencryptDevices refuses, as cryptsetup 2.6.1 does before anything
// else, a --header that does not exist without --encrypt or --decrypt
// (without a word), and a data device that cannot be opened beside a
// --header that can, or beside the new --header of --decrypt.
func checkReencryptDevices(c *cli.Context, dev string) error {
	hp := c.String("header")
	if hp == "" || blockdev.Scheme(hp) != "" || blockdev.Scheme(dev) != "" {
		return nil
	}
	_, err := os.Stat(hp)
	missing := errors.Is(err, os.ErrNotExist)
	switch {
	case missing && !c.Bool("encrypt") && !c.Bool("decrypt"):
		return exitf(exitParams, "")
	case err != nil && !(missing && c.Bool("decrypt")):
		return nil
	}
	f, _, derr := openDevice(dev, false)
	if derr != nil {
		if missing { // --decrypt to a new header: cryptsetup names both
			fmt.Fprintln(os.Stderr, derr)
			return exitf(exitParams, "Device %s does not exist or access denied.", hp)
		}
		return derr
	}
	return f.Close()
}

// reencrypt is cryptsetup 2.6.1's reencrypt for a LUKS2 volume that is not
// open: it marks the volume (unless --resume-only), then rewrites its data
// hotzone by hotzone (unless --init-only). SIGINT and SIGTERM stop it
// between hotzones with the metadata written, to be resumed by luksd or
// cryptsetup.
func reencrypt(c *cli.Context) error {
	if c.NArg() > 0 && c.Args().First() == "" {
		// popt takes an empty argument as the device.
		return exitf(exitParams, "Device  does not exist or access denied.")
	}
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	if err := checkReencryptDevices(c, dev); err != nil {
		return err
	}
	if c.IsSet("active-name") && (c.Bool("encrypt") || c.Bool("decrypt") || c.IsSet("header")) {
		return exitf(exitParams, "Option --active-name with --encrypt, --decrypt or --header is not supported by luksd.")
	}
	under := markedHeader(c, dev)
	if under != nil && c.Bool("init-only") {
		// cryptsetup 2.6.1 says so before it looks at --encrypt,
		// --decrypt or --keep-key.
		return exitf(exitParams, "LUKS2 reencryption already initialized. Aborting operation.")
	}
	if c.Bool("keep-key") && under == nil {
		// cryptsetup keeps the volume key and changes only the segment's
		// other parameters; luksd has no such run.
		if !c.IsSet("cipher") && !c.IsSet("key-size") && !c.IsSet("sector-size") && !c.Bool("encrypt") && !c.Bool("decrypt") {
			return exitf(exitParams, "No data segment parameters changed. Reencryption aborted.")
		}
		return exitf(exitParams, "Option --keep-key is not supported by luksd reencrypt.")
	}
	if encryptsPlainDevice(c, dev) {
		return reencryptEncrypt(c, dev)
	}
	if err := refuseLUKS1(c, dev); err != nil {
		return err
	}
	if c.Bool("decrypt") && !c.IsSet("header") && under != nil && under.ReencryptMode() != "decrypt" {
		return exitf(exitParams, "Device is not in LUKS2 decryption. Conflicting option --decrypt.")
	}
	if c.Bool("decrypt") || c.IsSet("header") {
		return reencryptWithHeader(c, dev) // reencrypt_decrypt.go
	}
	if st, err := onlineTarget(c, dev); err != nil {
		return err
	} else if st != nil && c.IsSet("device-size") {
		return exitf(exitParams, "Option --device-size with an online reencryption is not supported by luksd.")
	} else if st != nil {
		return reencryptOnline(c, st) // reencrypt_online.go
	}
	hp := headerPath(c, dev)
	h, f, err := readLUKS2Header(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	// The reencryption lock first, so that a second luksd reencrypt is
	// told what runs (as one beside cryptsetup's is), not that the first
	// one's claim holds the device.
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	// Offline: nothing may have the device open (luksd open or serve, a
	// mount, dm-crypt); the claim lasts the whole run.
	claim, err := blockdev.Open(dev, blockdev.OpenOptions{Exclusive: true})
	if errors.Is(err, blockdev.ErrInUse) {
		return exitf(exitBusy, "Failed to open %s in exclusive mode (already mapped or mounted).", dev)
	} else if err == nil {
		defer claim.Close()
	}
	if h, err = f.read(); err != nil { // as it is under the lock
		return headerError(hp, err)
	}
	marked := h.InReencryption()
	if err := checkReencryptMode(c, h, dev); err != nil {
		return err
	}
	if c.Bool("resume-only") && !marked {
		return exitf(exitParams, "Device reencryption not in progress.")
	}
	if marked && c.Bool("init-only") {
		return exitf(exitParams, "LUKS2 reencryption already initialized. Aborting operation.")
	}
	var pass *keyring.Secret
	if !marked {
		if pass, err = reencryptInit(c, h, f, f.File, f.Size); err != nil {
			return err
		}
		if c.Bool("init-only") {
			pass.Wipe()
			return nil
		}
		if h, err = f.read(); err != nil {
			return headerError(hp, err)
		}
	} else {
		if err := checkResumeResilience(c, h); err != nil {
			return err
		}
		if pass, err = resumePassphrase(c, hp); err != nil {
			return err
		}
	}
	defer pass.Wipe()
	return runReencrypt(c, h, f, hp, pass.Bytes(), f.File, f.Size)
}

// resumePassphrase asks for the passphrase that resumes the reencryption
// of the volume whose header is on hp. Without --resume-only, cryptsetup
// 2.6.1 first asks (on a terminal, unless --batch-mode) whether to resume
// at all.
func resumePassphrase(c *cli.Context, hp string) (*keyring.Secret, error) {
	if !c.Bool("resume-only") && !confirm(c, fmt.Sprintf("Device %s is already in LUKS2 reencryption. Do you wish to resume previously initialised operation?", hp)) {
		fmt.Fprint(os.Stderr, "Operation aborted.\n\n") // sic, as repair's
		return nil, exitf(exitParams, "")
	}
	return readPassphrase(keySource(c), "Enter passphrase for "+hp+": ", false)
}

// reencryptInit asks for the passphrase of each keyslot kept (-S, or all
// of them) and marks the volume (header f, the data on data of size
// bytes: f itself unless the header is detached); it returns the last
// passphrase.
func reencryptInit(c *cli.Context, h *luks2.Header, f *headerDevice, data luks2.File, size int64) (*keyring.Secret, error) {
	hp := f.Path
	slots := h.ActiveKeyslots()
	if s := c.Int("key-slot"); s >= 0 {
		if !h.KeyslotStatus(s).InUse() {
			return nil, exitf(exitParams, "") // cryptsetup 2.6.1 says nothing
		}
		slots = []int{s}
	}
	var bound []int
	for _, s := range slots {
		if h.KeyslotStatus(s) != luks2.KeyslotUnbound && h.KeyslotStatus(s).InUse() {
			bound = append(bound, s)
		}
	}
	if c.IsSet("key-file") && len(bound) != 1 {
		return nil, exitf(exitParams, "Key file can be used only with --key-slot or with exactly one key slot active.")
	}
	passphrases := map[int][]byte{}
	var last *keyring.Secret
	defer func() {
		for _, p := range passphrases {
			clear(p)
		}
	}()
	for _, s := range bound {
		p, err := keyslotPassphrase(c, h, f, s)
		if err != nil {
			last.Wipe()
			return nil, err
		}
		passphrases[s] = append([]byte(nil), p.Bytes()...)
		if last != nil {
			last.Wipe()
		}
		last = p
	}
	params := luks2.ReencryptParams{
		Cipher: c.String("cipher"), KeySize: c.Int("key-size") / 8, SectorSize: c.Int("sector-size"),
		Resilience: c.String("resilience"), Hash: c.String("resilience-hash"),
		Shift: c.Int64("reduce-device-size"),
	}
	if params.Cipher != "" && !strings.Contains(params.Cipher, "-") {
		params.Cipher += "-cbc-plain" // cryptsetup's default mode
	}
	seg, _ := h.Segment()
	// cryptsetup checks the new keyslots' PBKDF and the new segment only
	// once the passphrases open.
	var err error
	if params.PBKDF, err = reencryptPBKDF(c); err != nil {
		last.Wipe()
		return nil, err
	}
	if err := checkReencryptParams(params, seg); err != nil {
		last.Wipe()
		return nil, err
	}
	if err := checkShift(params.Shift, max(params.SectorSize, seg.SectorSize)); err != nil {
		last.Wipe()
		return nil, err
	}
	if err := checkDeviceSize(c, size-h.DataOffset(), max(params.SectorSize, seg.SectorSize)); err != nil {
		last.Wipe()
		return nil, err
	}
	// cryptsetup checks the zone alignment only when it loads the
	// reencryption it has just marked (not with --init-only); luksd
	// before marking it.
	if !c.Bool("init-only") {
		if err := checkZoneAlignment(c, max(dataBlockSize(data), params.SectorSize, seg.SectorSize)); err != nil {
			last.Wipe()
			return nil, err
		}
	}
	err = f.edit(func() error {
		again, err := f.read()
		if err != nil {
			return err
		}
		return again.ReencryptInit(f, size, passphrases, params)
	})
	if err == nil && c.Bool("verbose") {
		if marked, rerr := f.read(); rerr == nil {
			for _, s := range createdKeyslots(h, marked) {
				fmt.Printf("Key slot %d created.\n", s)
			}
		}
	}
	if err != nil {
		last.Wipe()
		if errors.Is(err, luks2.ErrReencryptionInitialized) {
			return nil, exitf(exitBusy, "LUKS2 reencryption already initialized in metadata.")
		}
		fmt.Fprintln(os.Stderr, "Failed to initialize LUKS2 reencryption in metadata.")
		return nil, headerError(hp, err)
	}
	return last, nil
}

// keyslotPassphrase asks for the passphrase of keyslot s of h (on f) until
// it opens the keyslot: --tries times on a terminal, as cryptsetup
// 2.6.1's reencrypt init does, once otherwise.
func keyslotPassphrase(c *cli.Context, h *luks2.Header, f *headerDevice, s int) (*keyring.Secret, error) {
	src := keySource(c)
	tries := 1
	if src.Interactive() {
		tries = max(c.Int("tries"), 1)
	}
	for try := 1; ; try++ {
		p, err := readPassphrase(src, fmt.Sprintf("Enter passphrase for key slot %d: ", s), false)
		if err != nil {
			return nil, err
		}
		vk, _, err := h.Unlock(f, p.Bytes(), s)
		clear(vk)
		if err == nil {
			verbosef(c, "Key slot %d unlocked.", s)
			return p, nil
		}
		p.Wipe()
		if !errors.Is(err, luks2.ErrWrongPassphrase) || try >= tries {
			return nil, headerError(f.Path, err)
		}
		fmt.Fprintln(os.Stderr, "No key available with this passphrase.")
	}
}

// createdKeyslots are the keyslots the reencryption init that turned
// before into after created for the new volume key (not its reencrypt
// keyslot), ascending, for -v.
func createdKeyslots(before, after *luks2.Header) []int {
	var meta struct {
		Keyslots map[string]struct{ Type string }
	}
	if json.Unmarshal(after.JSON(), &meta) != nil {
		return nil
	}
	var created []int
	for _, s := range after.ActiveKeyslots() {
		if !slices.Contains(before.ActiveKeyslots(), s) && meta.Keyslots[strconv.Itoa(s)].Type != "reencrypt" {
			created = append(created, s)
		}
	}
	return created
}

// reencryptPBKDF is the PBKDF of the new keyslots: nil copies each old
// keyslot's, as cryptsetup 2.6.1 does unless --pbkdf, --hash, --iter-time
// or --pbkdf-force-iterations is given (--pbkdf-memory and
// --pbkdf-parallel alone do not count); then the flags with cryptsetup's
// defaults for the rest.
func reencryptPBKDF(c *cli.Context) (*luks2.PBKDF, error) {
	if !c.IsSet("pbkdf") && !c.IsSet("hash") && !c.IsSet("iter-time") && !c.IsSet("pbkdf-force-iterations") {
		return nil, nil
	}
	p, err := pbkdfFromFlags(c)
	if err != nil {
		return nil, err
	}
	if p.Hash != "" && !luks2.HashSupported(p.Hash) {
		return nil, exitf(exitParams, "Requested hash %s is not supported.", p.Hash)
	}
	// The keyslot areas keep their cipher.
	p.AreaCipher, p.AreaKeySize = "", 0
	if err := checkPBKDF(2, p); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkReencryptParams refuses, with cryptsetup 2.6.1's words, a new
// cipher or key size luksd cannot use and a resilience mode it does not
// know (seg is the data segment now).
func checkReencryptParams(p luks2.ReencryptParams, seg luks2.Segment) error {
	cipher := cmp.Or(p.Cipher, seg.Cipher)
	// The key size luks2 picks: --key-size, else the segment's where the
	// cipher takes it, else the cipher's default.
	size := p.KeySize
	if spec, err := dmcrypt.ParseSpec(cipher); err == nil && size == 0 {
		size = seg.KeySize
		if spec.CheckKeySize(size) != nil {
			size = luks2.DefaultKeySize(cipher)
		}
	}
	sc, err := dmcrypt.New(cipher, make([]byte, size))
	if err != nil {
		return exitf(exitParams, "Unable to use cipher specification %s for LUKS2.", cipher)
	}
	sc.Wipe()
	switch p.Resilience {
	case "", "checksum":
		if p.Hash != "" && !luks2.HashSupported(p.Hash) {
			return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
		}
	case "journal", "none":
	case "datashift":
		if p.Shift == 0 { // datashift needs --reduce-device-size
			return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
		}
	default:
		fmt.Fprintf(os.Stderr, "Unsupported resilience mode %s\n", p.Resilience)
		return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
	}
	return nil
}

// checkDeviceSize refuses, as cryptsetup 2.6.1 does before it writes
// the reencryption metadata, a --device-size past the data (dataSize
// bytes from the data offset) or not a multiple of sectorSize (the
// larger of the old and new sector sizes; 0 does not check). A run
// refuses such a size too, but only after the volume was marked.
func checkDeviceSize(c *cli.Context, dataSize int64, sectorSize int) error {
	switch n := c.Int64("device-size"); {
	case n <= 0:
		return nil
	case n > dataSize:
		fmt.Fprintln(os.Stderr, "Reduced data size is larger than real device size.")
	case sectorSize > 0 && n%int64(sectorSize) != 0:
		fmt.Fprintf(os.Stderr, "Data device is not aligned to encryption sector size (%d bytes).\n", sectorSize)
	default:
		return nil
	}
	return exitf(exitParams, "Failed to initialize LUKS2 reencryption in metadata.")
}

// checkZoneAlignment refuses, as cryptsetup 2.6.1 does when it loads a
// reencryption, a --hotzone-size or --device-size that is not a multiple
// of align, its calculated zone alignment: the larger of the data
// device's block size and the old and new sector sizes.
func checkZoneAlignment(c *cli.Context, align int) error {
	a := int64(align)
	switch {
	case a <= 0:
		return nil
	case c.Int64("hotzone-size")%a != 0:
		fmt.Fprintf(os.Stderr, "Hotzone size must be multiple of calculated zone alignment (%d bytes).\n", align)
	case c.Int64("device-size")%a != 0:
		fmt.Fprintf(os.Stderr, "Device size must be multiple of calculated zone alignment (%d bytes).\n", align)
	default:
		return nil
	}
	return exitf(exitParams, "Failed to load LUKS2 reencryption context.")
}

// runReencrypt runs the marked reencryption (header f) of the data on
// data (size bytes) to its end or a signal, which stops it with the
// metadata written, to be resumed (exit 1, as cryptsetup).
func runReencrypt(c *cli.Context, h *luks2.Header, f *headerDevice, hp string, pass []byte, data luks2.DataDevice, size int64) error {
	var stop atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			stop.Store(true)
		}
	}()
	if l, err := h.ReencryptLayout(size); err == nil {
		if sector := int64(max(l.Old.SectorSize, l.New.SectorSize)); sector > 0 && c.Int64("device-size")%sector != 0 {
			return exitf(exitParams, "Illegal device size requested in reencryption parameters.")
		}
		if err := checkZoneAlignment(c, max(deviceBlockSize(data), l.Old.SectorSize, l.New.SectorSize)); err != nil {
			return err
		}
	}
	progress := newReencryptProgress(c)
	progress.onStart = func() {
		// cryptsetup says so once the passphrase has opened the keys.
		if c.Bool("force-offline-reencrypt") && !c.Bool("batch-mode") {
			fmt.Fprintln(progress.w, "Resuming LUKS reencryption in forced offline mode.")
		}
	}
	run := luks2.ReencryptRun{
		HotzoneSize: c.Int64("hotzone-size"),
		DeviceSize:  c.Int64("device-size"),
		Resilience:  c.String("resilience"),
		Hash:        c.String("resilience-hash"),
		Data:        data,
		Commit:      func(write func() error) error { return f.Edit(write) },
		Stop:        stop.Load,
		Progress:    progress.report,
	}
	err := h.Reencrypt(f, size, pass, c.Int("key-slot"), run)
	switch {
	case err == nil && stop.Load() && progress.done < progress.total:
		return progress.interrupted()
	case err == nil:
		return nil
	case errors.Is(err, luks2.ErrWrongPassphrase):
		// cryptsetup 2.6.1 fails loading the reencryption context without
		// a word.
		return exitf(exitParams, "")
	case errors.Is(err, luks2.ErrIllegalDeviceSize):
		return exitf(exitParams, "Illegal device size requested in reencryption parameters.")
	case errors.Is(err, luks2.ErrShiftBeyondData):
		return exitf(exitParams, "Failed to load LUKS2 reencryption context.")
	}
	return reencryptRunError(hp, err)
}
