package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "reencrypt",
		Usage:     "change a LUKS2 volume's volume key, cipher or sector size in place (offline)",
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
			&cli.IntFlag{Name: "progress-frequency", Usage: "print progress every `SECONDS`"},
			&cli.BoolFlag{Name: "progress-json", Usage: "print progress as JSON lines"},
		}),
		Action: reencrypt,
	})
}

// reencrypt is cryptsetup 2.6.1's reencrypt for a LUKS2 volume that is not
// open: it marks the volume (unless --resume-only), then rewrites its data
// hotzone by hotzone (unless --init-only). SIGINT and SIGTERM stop it
// between hotzones with the metadata written, to be resumed by luksd or
// cryptsetup.
func reencrypt(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	if c.Bool("keep-key") {
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
	if c.Bool("decrypt") || c.IsSet("header") {
		return reencryptWithHeader(c, dev) // reencrypt_decrypt.go
	}
	if st, err := activeVolume(dev); err != nil {
		return err
	} else if st != nil && c.IsSet("device-size") {
		return exitf(exitParams, "Option --device-size with an online reencryption is not supported by luksd.")
	} else if st != nil {
		return reencryptOnline(c, st) // reencrypt_online.go
	}
	// Offline: nothing may have the device open (luksd open or serve, a
	// mount, dm-crypt); the claim lasts the whole run.
	claim, err := blockdev.Open(dev, blockdev.OpenOptions{Exclusive: true})
	if errors.Is(err, blockdev.ErrInUse) {
		return exitf(exitBusy, "Failed to open %s in exclusive mode (already mapped or mounted).", dev)
	} else if err == nil {
		defer claim.Close()
	}
	hp := headerPath(c, dev)
	h, f, err := readLUKS2Header(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	lock, err := lockReencryption(f, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
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
		if pass, err = reencryptInit(c, h, f); err != nil {
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
		if pass, err = readPassphrase(keySource(c), "Enter passphrase for "+hp+": ", false); err != nil {
			return err
		}
		if !c.Bool("batch-mode") {
			fmt.Println("Resuming LUKS reencryption in forced offline mode.")
		}
	}
	defer pass.Wipe()
	return runReencrypt(c, h, f, hp, pass.Bytes(), f.File, f.Size)
}

// reencryptInit asks for the passphrase of each keyslot kept (-S, or all
// of them) and marks the volume; it returns the last passphrase.
func reencryptInit(c *cli.Context, h *luks2.Header, f *headerDevice) (*keyring.Secret, error) {
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
		prompt := fmt.Sprintf("Enter passphrase for key slot %d: ", s)
		p, err := readPassphrase(keySource(c), prompt, false)
		if err != nil {
			return nil, err
		}
		if _, _, err := h.Unlock(f, p.Bytes(), s); err != nil {
			p.Wipe()
			return nil, headerError(hp, err)
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
	seg, _ := h.Segment()
	if err := checkShift(params.Shift, max(params.SectorSize, seg.SectorSize)); err != nil {
		last.Wipe()
		return nil, err
	}
	if err := checkDeviceSize(c, f.Size-h.DataOffset(), max(params.SectorSize, seg.SectorSize)); err != nil {
		last.Wipe()
		return nil, err
	}
	// cryptsetup checks the zone alignment only when it loads the
	// reencryption it has just marked; luksd before marking it.
	if err := checkZoneAlignment(c, max(dataBlockSize(f.File), params.SectorSize, seg.SectorSize)); err != nil {
		last.Wipe()
		return nil, err
	}
	err := f.edit(func() error {
		again, err := f.read()
		if err != nil {
			return err
		}
		return again.ReencryptInit(f, f.Size, passphrases, params)
	})
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
// data (size bytes) to its end or a signal.
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
	run := luks2.ReencryptRun{
		HotzoneSize: c.Int64("hotzone-size"),
		DeviceSize:  c.Int64("device-size"),
		Resilience:  c.String("resilience"),
		Hash:        c.String("resilience-hash"),
		Data:        data,
		Commit:      func(write func() error) error { return f.Edit(write) },
		Stop:        stop.Load,
		Progress:    reencryptProgress(c),
	}
	err := h.Reencrypt(f, size, pass, c.Int("key-slot"), run)
	switch {
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
	return reencryptError(hp, err)
}

// reencryptProgress returns what prints the progress as --progress-json,
// --progress-frequency and --batch-mode say.
func reencryptProgress(c *cli.Context) func(done, total int64) {
	start := time.Now()
	every := time.Duration(c.Int("progress-frequency")) * time.Second
	if every == 0 {
		every = time.Second
	}
	json, text := c.Bool("progress-json"), !c.Bool("batch-mode")
	var lastPrint time.Time
	return func(done, total int64) {
		if !json && !text || time.Since(lastPrint) < every && done < total {
			return
		}
		lastPrint = time.Now()
		printReencryptProgress(c.Args().First(), json, start, done, total)
	}
}

// printReencryptProgress prints cryptsetup's progress line on a terminal
// (rewritten in place, "Finished" at the end), or its JSON line.
func printReencryptProgress(dev string, json bool, start time.Time, done, total int64) {
	elapsed := time.Since(start)
	speed := float64(done) / max(elapsed.Seconds(), 1e-3) // bytes/s
	// cryptsetup shows an ETA of 0 until there is a rate.
	var eta time.Duration
	if done > 0 {
		eta = time.Duration(float64(total-done) / speed * float64(time.Second))
	}
	if json {
		fmt.Printf("{\"device\":\"%s\",\"device_bytes\":\"%d\",\"device_size\":\"%d\",\"speed\":\"%d\",\"eta_ms\":\"%d\",\"time_ms\":\"%d\"}\n",
			dev, done, total, int64(speed), eta.Milliseconds(), elapsed.Milliseconds())
		return
	}
	rate, unit := speed, "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if rate < 1024 {
			break
		}
		rate, unit = rate/1024, u
	}
	if done < total {
		fmt.Printf("\033[2K\rProgress: %5.1f%%, ETA %02dm%02ds, %4d MiB written, speed %5.1f %s/s",
			float64(done)*100/float64(total), int(eta.Minutes()), int(eta.Seconds())%60, done>>20, rate, unit)
		return
	}
	fmt.Printf("\033[2K\rFinished, time %02dm%02ds, %4d MiB written, speed %5.1f %s/s\n",
		int(elapsed.Minutes()), int(elapsed.Seconds())%60, done>>20, rate, unit)
}
