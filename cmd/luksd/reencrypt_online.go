package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/s3"
	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// Online reencryption: `luksd reencrypt` on a volume a luksd daemon has
// open (by its data device, NAME, /dev/mapper/NAME or /dev/nbdN) marks
// it as the offline path does, opens both volume keys under the
// reencryption lock, and hands them to the daemon, which rewrites the
// data while it serves the volume (daemon/reencrypt_online.go, driven by
// runOnlineJob below). The CLI prints the daemon's progress as the
// offline path prints its own, and exits with the job: finished, paused
// (the daemon closed) or failed. As with cryptsetup, a paused job resumes
// only when asked: `luksd reencrypt [--resume-only] NAME` once the volume
// is open again (or offline, or by cryptsetup).

func init() { daemon.Reencrypter = runOnlineJob }

// ExitCode lets the daemon report an engine failure's exit code.
func (e *exitError) ExitCode() int { return e.code }

// activeVolume is the state of the luksd volume arg names (its data
// device, NAME, /dev/mapper/NAME or its block device), or nil.
func activeVolume(arg string) (*daemon.State, error) {
	name := daemon.UserOf(arg)
	if name == "" {
		n, ok, err := daemon.ResolveName(arg)
		if !ok || err != nil {
			return nil, nil
		}
		name = n
	}
	return daemon.Active(name)
}

// onlineTarget is the luksd volume to reencrypt dev through online: the
// one --active-name names, which must be active and map dev (by its data
// device, or dev names it too), else the one dev names, or nil (offline).
func onlineTarget(c *cli.Context, dev string) (*daemon.State, error) {
	name := c.String("active-name")
	if name == "" {
		return activeVolume(dev)
	}
	st, err := daemon.Active(name)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, exitf(exitDevice, "Device %s is not active.", name)
	}
	if !sameDevice(st.Image, dev) {
		if other, _ := activeVolume(dev); other == nil || other.Name != st.Name {
			return nil, exitf(exitParams, "Mismatching parameters on device %s.", name)
		}
	}
	return st, nil
}

// reencryptOnline runs reencrypt on the volume st's daemon serves.
func reencryptOnline(c *cli.Context, st *daemon.State) error {
	if c.Int64("reduce-device-size") > 0 {
		// The daemon's data path cannot move the data under its clients.
		return exitf(exitParams, "Option --reduce-device-size with an online reencryption is not supported by luksd.")
	}
	if c.IsSet("header") || st.Header != "" && st.Header != st.Image {
		return exitf(exitParams, "Option --header is not supported by luksd for online reencryption.")
	}
	if st.ReadOnly {
		return exitf(exitParams, "Volume %s is open read-only: close it and reencrypt it offline, or open it read-write.", st.Name)
	}
	if st.Type == "LUKS1" {
		if err := refuseLUKS1(c, st.Image); err != nil {
			return err
		}
	}
	if st.Type != "LUKS2" {
		return exitf(exitParams, "Device %s is not a valid LUKS2 device.", st.Image)
	}
	if err := refuseSharedChunk(st); err != nil {
		return err
	}
	oldKey, newKey, err := onlineKeys(c, st.Image)
	if err != nil || oldKey == nil {
		return err
	}
	defer oldKey.Wipe()
	defer newKey.Wipe()
	opts := daemon.ReencryptOptions{HotzoneSize: c.Int64("hotzone-size"),
		Resilience: c.String("resilience"), Hash: c.String("resilience-hash")}
	// SIGINT or SIGTERM pause the job after its step, as they stop the
	// offline path; luksd reencrypt NAME resumes it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	pause := make(chan struct{})
	go func() {
		if _, ok := <-sig; ok {
			close(pause)
		}
	}()
	err = daemon.Reencrypt(st.Name, oldKey.Bytes(), newKey.Bytes(), opts, newReencryptProgress(c).report, pause)
	var je *daemon.JobError
	if errors.As(err, &je) && je.Code != 0 {
		return exitf(je.Code, "%s", je.Msg)
	}
	return err
}

// refuseSharedChunk refuses an online reencryption of an S3 volume
// whose chunk objects hold header and data together (chunks larger than
// the data offset, or not dividing it). The CLI and the job write the
// header through volumes of their own while the daemon's writes the
// data, and each uploads whole chunks from its own cache: each would put
// back the other's stale half (a test saw the data's first chunk
// revert). Offline, one volume does both, so that path is safe.
func refuseSharedChunk(st *daemon.State) error {
	if blockdev.Scheme(st.Image) != "s3" || st.Offset <= 0 {
		return nil
	}
	store, err := s3.Connect(st.Image)
	if err != nil {
		return locationError(st.Image, err)
	}
	m, err := s3.ReadManifest(store)
	if err != nil {
		return locationError(st.Image, err)
	}
	if m.ChunkSize > 0 && st.Offset%m.ChunkSize != 0 {
		return exitf(exitParams, "Online reencryption of %s is not supported by luksd: its %d-byte chunks hold header and data together. Close it and reencrypt it offline.",
			st.Image, m.ChunkSize)
	}
	return nil
}

// onlineKeys marks the volume at path for reencryption unless it is, and
// opens both volume keys, under the reencryption lock; nil keys when
// there is nothing left for the daemon to do (--init-only, or a
// reencryption that opening finished).
func onlineKeys(c *cli.Context, path string) (oldKey, newKey *keyring.Secret, err error) {
	hw, err := openHeaderDevice(c, path, true)
	if err != nil {
		return nil, nil, err
	}
	defer hw.Close()
	h, err := hw.read()
	if err != nil {
		return nil, nil, headerError(path, err)
	}
	lock, err := lockReencryption(hw, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return nil, nil, err
	}
	defer lock.Unlock()
	marked := h.InReencryption()
	switch {
	case c.Bool("resume-only") && !marked:
		return nil, nil, exitf(exitParams, "Device reencryption not in progress.")
	case marked && c.Bool("init-only"):
		return nil, nil, exitf(exitParams, "LUKS2 reencryption already initialized. Aborting operation.")
	case marked && h.ReencryptMode() == "reencrypt" && h.ReencryptResilience() == "datashift":
		// The daemon's data path cannot move the data under its clients.
		return nil, nil, exitf(exitParams, "Reencryption of %s moves its data (--reduce-device-size): close it and resume it offline.", path)
	}
	var pass *keyring.Secret
	if !marked {
		pass, err = reencryptInit(c, h, hw, hw.File, hw.Size)
	} else {
		pass, err = resumePassphrase(c, path)
	}
	if err != nil || c.Bool("init-only") {
		pass.Wipe()
		return nil, nil, err
	}
	defer pass.Wipe()
	var m *luks2.ReencryptMapping
	err = hw.edit(func() error {
		if h, err = hw.read(); err != nil {
			return err
		}
		m, err = h.OpenReencrypting(hw, hw.Size, pass.Bytes(), c.Int("key-slot"), nil)
		return err
	})
	if errors.Is(err, luks2.ErrWrongPassphrase) {
		return nil, nil, exitf(exitParams, "") // as the offline path
	} else if err != nil {
		return nil, nil, reencryptError(path, err)
	}
	defer m.Wipe()
	if m.OldKey == nil {
		return nil, nil, nil
	}
	if oldKey, err = keyring.FromBytes(m.OldKey); err != nil {
		return nil, nil, withCode(exitMemory, err)
	}
	if newKey, err = keyring.FromBytes(m.NewKey); err != nil {
		oldKey.Wipe()
		return nil, nil, withCode(exitMemory, err)
	}
	return oldKey, newKey, nil
}

// runOnlineJob is the daemon's Reencrypter: under the reencryption lock,
// it maps the volume as the reencryption stands and runs the steps
// through the daemon's data device, each header write under the metadata
// lock.
func runOnlineJob(job *daemon.ReencryptJob) error {
	f, size, err := openDevice(job.Location, true)
	if err != nil {
		return err
	}
	hw := &headerDevice{&luks2.HeaderFile{File: f, Path: job.Location, Size: size, LockName: remoteLockName(job.Location)}}
	defer hw.Close()
	h, err := hw.read()
	if err != nil {
		return headerError(job.Location, err)
	}
	lock, err := lockReencryption(hw, h.UUID(), "Reencryption process is already running.")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if h, err = hw.read(); err != nil {
		return headerError(job.Location, err)
	}
	l, err := h.ReencryptLayout(hw.Size)
	if err != nil {
		return reencryptError(job.Location, err)
	}
	if l.Hot {
		return exitf(exitParams, "Reencryption of %s needs recovery: open it again.", job.Location)
	}
	data, err := job.Begin(daemonSegment(l.Old, len(job.OldKey)), daemonSegment(l.New, len(job.NewKey)), l.Done)
	if err != nil {
		return fmt.Errorf("mapping the volume for reencryption: %w", err)
	}
	run := luks2.ReencryptRun{
		HotzoneSize: job.HotzoneSize, Resilience: job.Resilience, Hash: job.Hash,
		Data: data, Commit: hw.Edit, Progress: job.Progress, Stop: job.Stop, Hold: job.Hold,
	}
	err = h.ReencryptWithKeys(dataFlusher{hw, data}, hw.Size, job.OldKey, job.NewKey, run)
	if err != nil {
		return reencryptError(job.Location, err)
	}
	return nil
}

// daemonSegment is a reencryption segment as the daemon maps it.
func daemonSegment(s luks2.Segment, keySize int) daemon.Segment {
	return daemon.Segment{Cipher: s.Cipher, Offset: s.Offset, Size: s.Size, SectorSize: s.SectorSize, KeySize: keySize}
}

// dataFlusher is the header device whose Flush also flushes the daemon's
// data device, which the job's hotzones are written through.
type dataFlusher struct {
	*headerDevice
	data interface{ Flush() error }
}

func (d dataFlusher) Flush() error {
	if err := d.data.Flush(); err != nil {
		return err
	}
	return d.headerDevice.Flush()
}

// writeReencryptProgress is status's line (luksd's own, after
// cryptsetup's) about a volume in reencryption: how far it is, and
// whether a job runs.
func writeReencryptProgress(w io.Writer, s *daemon.State) {
	total := s.ReencryptTotal
	if total == 0 {
		total = s.Size
	}
	job := "paused (luksd reencrypt " + s.Name + " resumes it)"
	if s.ReencryptRunning {
		job = "running in the daemon"
	}
	pct := 0.0
	if total > 0 {
		pct = float64(s.ReencryptDone) * 100 / float64(total)
	}
	fmt.Fprintf(w, "  reencrypted: %d of %d bytes (%.1f%%), %s\n", s.ReencryptDone, total, pct, job)
}
