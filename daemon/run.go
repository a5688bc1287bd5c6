package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon/frontend"
	"github.com/luksd/luksd/keyring"
	"golang.org/x/sys/unix"
)

// RunOptions say how Run runs a volume.
type RunOptions struct {
	// KernelIO: the daemon is in the kernel's block I/O path. It checks
	// that it is an IO flusher (PR_GET_IO_FLUSHER, set by Spawn or Exec
	// before the exec) and that its key schedule and I/O buffers are
	// locked in memory, as a process there must (see lockedMemory).
	KernelIO bool
	// Ready is called once the kernel block device exists and the state
	// file is written.
	Ready func(devicePath string)
}

// Run runs spec's volume in this process until it is closed. It claims
// the name, opens the data device and the crypt layer with key (which it
// wipes as soon as the crypt layer holds its own copy), attaches the
// frontend, writes the state, calls opts.Ready and serves until a close
// request, a stop signal or the kernel device going away; then it
// flushes, detaches and removes its state. Errors before Ready mean the
// volume was never activated.
func Run(spec Spec, key *keyring.Secret, opts RunOptions) error {
	defer key.Wipe()
	fe, ok := frontend.Lookup(spec.Options.Frontend)
	if !ok {
		return fmt.Errorf("unknown frontend %q", spec.Options.Frontend)
	}
	o := spec.Options
	return runDaemon(daemonConfig{
		Frontend: fe,
		Attach: frontend.Options{
			Name:      spec.Name,
			ReadOnly:  o.ReadOnly,
			BlockSize: spec.blockSize(),
			Device:    o.Device,
			Recover:   o.Recover,
			IOTimeout: o.IOTimeout,
		},
		State:    spec.state(),
		Open:     spec.opener(key),
		Mapping:  o.Mapping,
		KernelIO: opts.KernelIO,
		Ready:    opts.Ready,
	})
}

// state is what the state file says of spec's volume; the daemon adds
// the device, frontend, pid and start time.
func (spec Spec) state() State {
	seg, o := spec.Segment, spec.Options
	return State{
		Image:         spec.Location,
		Header:        spec.Header,
		Type:          spec.Type,
		UUID:          spec.UUID,
		Cipher:        seg.Cipher,
		KeySize:       seg.KeySize,
		KeySlot:       spec.KeySlot,
		SectorSize:    seg.SectorSize,
		Offset:        seg.Offset,
		Skipped:       int64(seg.IVOffset),
		ReadOnly:      o.ReadOnly,
		AllowDiscards: o.AllowDiscards,
		Reencryption:  spec.reencryptionStatus(),
		ReencryptDone: spec.reencryptedBytes(),
	}
}

// opener opens spec's crypt layer with key, which it wipes as soon as the
// crypt layer holds its own copy, for daemonConfig.Open.
func (spec Spec) opener(key *keyring.Secret) func() (opened, error) {
	return func() (opened, error) {
		d, backend, keysLocked, err := openCrypt(spec, key)
		var keys *keyControl
		if err == nil { // a segmented Device refuses Suspend itself
			keys, err = newKeyControl(d, spec.Segment, key.Bytes())
			if err != nil {
				d.Close()
			}
		}
		key.Wipe() // the crypt layer keeps its own expanded keys
		if err != nil {
			return opened{}, err
		}
		return opened{dev: d, takeLost: backend.TakeLostWrites, claim: backend.Claim(), keysLocked: keysLocked, keys: keys,
			online: newOnlineJob(d, spec)}, nil
	}
}

// daemonConfig is one active volume as the daemon runs it.
type daemonConfig struct {
	Frontend frontend.Frontend
	Attach   frontend.Options
	// State is filled in by Run (image, cipher, sizes...); the daemon adds
	// the device, frontend, pid and start time.
	State State
	// Open opens the plaintext device the frontend serves; the daemon
	// flushes and closes it on the way out.
	Open     func() (opened, error)
	Mapping  string // Options.Mapping
	KernelIO bool   // see RunOptions
	// Ready is called once the kernel block device exists and the state
	// file is written.
	Ready func(devicePath string)
	// CallerReports: the caller prints an error that ends the volume
	// before Ready (serve, in the foreground), so runDaemon does not log
	// it too: one line, not two.
	CallerReports bool
}

// opened is the device a daemon serves, and what it knows of the data
// device below. dev is a field, not embedded: the frontend must get dev
// itself, whose capabilities (blockdev.Caps) it advertises.
type opened struct {
	dev blockdev.Device
	// takeLost takes the data device's lost writes (see
	// blockdev.Tracked.TakeLostWrites); nil when it keeps no record.
	takeLost   func() error
	claim      string      // how the data device is claimed (blockdev.Backend.Claim)
	keysLocked bool        // the key schedule is locked in memory
	keys       *keyControl // suspend and resume; nil in tests that open no crypt layer
	online     *onlineJob  // online reencryption (reencrypt_online.go); nil without a crypt layer
}

// runDaemon claims the name, attaches the frontend and serves until it is
// told to stop (see serveVolume) or the kernel device goes away; then it
// flushes, detaches and removes its state. Errors before Ready mean the
// volume was never activated.
func runDaemon(cfg daemonConfig) error {
	name := cfg.Attach.Name
	lock, err := claimName(name)
	if err != nil {
		return err
	}
	activated, ready := false, cfg.Ready
	cfg.Ready = func(p string) {
		activated = true
		if ready != nil {
			ready(p)
		}
	}
	requester, err := serveVolume(cfg)
	releaseName(name, lock)
	reply := ctlOK
	switch {
	case err != nil && !activated && cfg.CallerReports:
		// Never activated: the caller prints err.
	case errors.Is(err, blockdev.ErrLostWrites):
		// The device took the last flush: what is lost was lost earlier,
		// and every flush since has reported it.
		Log.Printf("%s: closed; %s", name, oneLine(err))
		reply, err = ctlWarning+oneLine(err), nil
	case err != nil:
		Log.Printf("%s: stopped: %s", name, oneLine(err))
		reply = "error: " + oneLine(err)
	default:
		Log.Printf("%s: closed", name)
	}
	// The closer hears back only once the state is gone.
	if requester != nil {
		fmt.Fprintln(requester, reply)
		requester.Close()
	}
	return err
}

// serveVolume runs the volume while runDaemon holds its name. It returns
// the control connection that asked to close, if one did.
func serveVolume(cfg daemonConfig) (requester net.Conn, err error) {
	// Caught from the start: a signal while attaching is handled right
	// after, instead of killing the daemon with the device attached.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals...)
	signal.Notify(sigs, syscall.SIGHUP)
	defer signal.Stop(sigs)
	defer dumpStacksOnSignal()()

	name := cfg.Attach.Name
	st := cfg.State
	st.Name = name
	st.PID = os.Getpid()
	st.Frontend = cfg.Frontend.Name()
	st.Started = time.Now()
	// The data device first: that it cannot be opened is what to report
	// about a volume that cannot start.
	vol, err := cfg.Open()
	if err != nil {
		return nil, err
	}
	dev := vol.dev
	st.Size = dev.Size()
	st.Claim = vol.claim
	defer func() {
		if ferr := dev.Flush(); ferr != nil {
			if err == nil {
				err = fmt.Errorf("flush: %w", ferr)
			} else if !errors.Is(err, ferr) && !bothLost(err, ferr) {
				Log.Printf("%s: flush: %s", name, oneLine(ferr))
			}
		}
		if cerr := dev.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if cfg.KernelIO {
		if err := checkIOFlusher(); err != nil {
			return nil, err
		}
		st.IOFlusher = true
		if err := protectFromOOM(); err != nil {
			return nil, err
		}
		if err := lockedMemory(); err != nil {
			return nil, err
		}
		if !vol.keysLocked {
			return nil, errors.New("cannot lock the volume's key schedule in memory (mlock; RLIMIT_MEMLOCK too low?)")
		}
		st.MemoryLocked = true
	}

	ctl, err := net.Listen("unix", controlPath(name))
	if err != nil {
		return nil, fmt.Errorf("cannot create the control socket: %v", err)
	}
	defer ctl.Close()

	attach := cfg.Attach
	attach.Logf = Log.Printf
	att, err := cfg.Frontend.Attach(dev, attach)
	if err != nil {
		return nil, err
	}
	st.Device = att.DevicePath()
	st.Extra = att.State()
	if err := makeMapping(&st, cfg.Mapping, cfg.Attach.Recover); err != nil {
		att.Detach()
		return nil, err
	}
	if err := writeState(&st); err != nil {
		removeMapping(&st, false)
		att.Detach()
		return nil, fmt.Errorf("cannot write the state file: %v", err)
	}
	if vol.keys != nil {
		vol.keys.saveState = func(suspended bool) error {
			st.Suspended = suspended
			return writeState(&st)
		}
	}
	announceDevice(st.Device)
	Log.Printf("%s: %s %s active on %s (frontend %s, pid %d)", name, st.Type, st.Image, st.Device, st.Frontend, st.PID)
	if cfg.Ready != nil {
		cfg.Ready(st.UsablePath())
	}
	return serveUntilStopped(&st, ctl, att, vol, sigs)
}

// stopSignals ask the daemon to close. SIGQUIT is one of them rather than
// Go's default (a goroutine dump and exit), which would drop the device.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT}

// stopPoll is how often a daemon told to stop while its device is in use
// looks whether it has been released.
var stopPoll = time.Second

// serveUntilStopped answers close requests and signals until the volume
// is closed or the kernel device goes away:
//
//   - "close" on the control socket detaches unless the device is in use
//     (mounted, held), which is refused as cryptsetup close refuses it;
//     "close deferred" then closes once it is released, as a stop signal
//     does, until "cancel-deferred";
//   - SIGTERM, SIGINT or SIGQUIT detach at once when the device is not in
//     use; while it is, the daemon goes on serving (a stray signal must
//     not take a mounted disk away), logs that it waits, and detaches as
//     soon as the device is released: systemd stops the unit after
//     unmounting what is on it, and SIGKILL after its timeout still ends
//     the daemon;
//   - SIGHUP reopens the log file (logrotate); SIGUSR1 writes every
//     goroutine's stack to the log (log.go).
func serveUntilStopped(st *State, ctl net.Listener, att frontend.Attachment, vol opened, sigs <-chan os.Signal) (net.Conn, error) {
	name := st.Name
	done := make(chan struct{})
	defer close(done)
	closes := make(chan closeRequest)
	vol.online.attach(st, vol.keys)
	go acceptControl(ctl, closes, done, vol.keys, newLiveControl(st, vol, att), vol.online)
	gone := make(chan error, 1)
	go func() { gone <- att.Wait() }()
	kdev, busy := att.DevicePath(), st.BusyPath()
	releasable := func() bool { return !vol.keys.suspended() && !deviceBusy(busy) && unname(st) }
	// Set while a stop signal or a deferred close waits for release.
	var wait releaseWait
	defer wait.stop()
	failCheck := newFailCheck(att)
	defer failCheck.stop()
	for {
		select {
		case <-failCheck.c:
			if failCheck.failed() {
				Log.Printf("%s: a request's handling failed: writes fail with EIO until the volume is opened again; status shows it", name)
				markFailed(st, vol)
			}
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				Log.Printf("%s: hangup: %s", name, reopenLog())
				continue
			}
			if releasable() {
				Log.Printf("%s: %v, detaching", name, sig)
				return nil, detach(att, vol)
			}
			Log.Printf("%s: %v while %s is in use: serving on, closing once it is released", name, sig, busy)
			wait.start()
		case <-wait.c:
			if releasable() {
				Log.Printf("%s: %s released, detaching", name, busy)
				return nil, detach(att, vol)
			}
		case req := <-closes:
			conn := req.conn
			switch {
			case req.cmd == ctlCancelDeferred:
				if wait.c != nil {
					Log.Printf("%s: deferred close cancelled", name)
				}
				wait.stop()
				fmt.Fprintln(conn, ctlOK)
				conn.Close()
				continue
			case vol.keys.suspended():
				fmt.Fprintf(conn, "error: %s is suspended; resume it first (luksResume)\n", name)
				conn.Close()
				continue
			case !releasable():
				if req.cmd == ctlCloseDeferred {
					Log.Printf("%s: %s is in use: closing once it is released (deferred)", name, busy)
					wait.start()
					fmt.Fprintln(conn, ctlDeferred)
				} else {
					fmt.Fprintln(conn, ctlBusy)
				}
				conn.Close()
				continue
			}
			return conn, detach(att, vol)
		case werr := <-gone:
			// The kernel side went away by itself (nbd-client -d, ublk
			// device deleted): nothing is left to detach.
			Log.Printf("%s: %s went away", name, kdev)
			if err := removeMapping(st, true); err != nil {
				Log.Printf("%s: %s", name, oneLine(err))
			}
			return nil, werr
		}
	}
}

// failPoll is how often the daemon asks its frontend whether a request's
// handling failed (frontend.Failer), to record it for status.
var failPoll = time.Second

// failCheck ticks every failPoll until the frontend has failed; its c is
// nil for a frontend that cannot fail.
type failCheck struct {
	f frontend.Failer
	t *time.Ticker
	c <-chan time.Time
}

func newFailCheck(att frontend.Attachment) *failCheck {
	f, ok := att.(frontend.Failer)
	if !ok {
		return &failCheck{}
	}
	t := time.NewTicker(failPoll)
	return &failCheck{f: f, t: t, c: t.C}
}

// failed reports whether the frontend has failed, once: then it stops
// ticking.
func (fc *failCheck) failed() bool {
	if !fc.f.Failed() {
		return false
	}
	fc.stop()
	return true
}

func (fc *failCheck) stop() {
	if fc.t != nil {
		fc.t.Stop()
		fc.t, fc.c = nil, nil
	}
}

// markFailed records in the state file that the volume failed, under the
// lock that guards the state.
func markFailed(st *State, vol opened) {
	if vol.online != nil {
		vol.online.saveState(func(st *State) { st.Failed = true })
		return
	}
	st.Failed = true
	if err := writeState(st); err != nil {
		Log.Printf("%s: %s", st.Name, oneLine(err))
	}
}

// releaseWait ticks every stopPoll while the daemon waits for its device
// to be released before it closes.
type releaseWait struct {
	t *time.Ticker
	c <-chan time.Time // nil while not waiting
}

func (w *releaseWait) start() {
	if w.t == nil {
		w.t = time.NewTicker(stopPoll)
		w.c = w.t.C
	}
}

func (w *releaseWait) stop() {
	if w.t != nil {
		w.t.Stop()
		w.t, w.c = nil, nil
	}
}

// unname removes the volume's name (removeMapping) before the device is
// detached, and reports whether it is gone; a mapping opened since the
// busy check stays, and so does the volume.
func unname(st *State) bool {
	if err := removeMapping(st, false); err != nil {
		Log.Printf("%s: %s", st.Name, oneLine(err))
		return false
	}
	return true
}

// detach detaches the kernel device. Acknowledged writes lost earlier have
// failed every flush since; they are taken out of the way first, so that
// the kernel's last flush answers for what is still in flight, and are
// returned (ErrLostWrites) for the closer's warning when nothing else
// fails.
func detach(att frontend.Attachment, vol opened) error {
	vol.online.pause()
	var lost error
	if vol.takeLost != nil {
		lost = vol.takeLost()
	}
	if err := att.Detach(); err != nil {
		return err
	}
	return lost
}

// bothLost reports whether both errors report lost writes (the same ones,
// seen by the frontend's flush and the daemon's last).
func bothLost(a, b error) bool {
	return errors.Is(a, blockdev.ErrLostWrites) && errors.Is(b, blockdev.ErrLostWrites)
}

// deviceBusy reports whether a block device is open exclusively elsewhere
// (mounted, used by dm/md/swap): an O_EXCL open fails with EBUSY then.
// Tests replace it.
var deviceBusy = func(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Is(err, unix.EBUSY)
	}
	unix.Close(fd)
	return false
}
