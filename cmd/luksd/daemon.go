package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"golang.org/x/sys/unix"
)

// daemonConfig is one active volume as the daemon runs it.
type daemonConfig struct {
	Frontend frontend
	Attach   attachOptions
	// State is filled in by open (image, cipher, sizes...); the daemon adds
	// the device, frontend, pid and start time.
	State volumeState
	// Open opens the plaintext device the frontend serves; the daemon
	// flushes and closes it on the way out.
	Open func() (blockdev.Device, error)
	// KernelIO makes the daemon check that it is an IO flusher
	// (PR_GET_IO_FLUSHER, set by the parent before exec) and that its I/O
	// buffers are locked in memory, as a process in the kernel's block I/O
	// path must (Open locks the key schedule: see lockedMemory).
	KernelIO bool
	// Ready is called once the kernel block device exists and the state
	// file is written.
	Ready func(devicePath string)
}

// Replies on the control socket to "close". A close that succeeded while
// writes that failed earlier were never written again answers with a
// warning line instead of ctlOK.
const (
	ctlOK      = "ok"
	ctlBusy    = "busy"
	ctlWarning = "warning: "
)

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
	requester, err := serveVolume(cfg)
	releaseName(name, lock)
	reply := ctlOK
	switch {
	case errors.Is(err, blockdev.ErrLostWrites):
		// The device took the last flush: what is lost was lost earlier,
		// and every flush since has reported it.
		daemonLog.Printf("%s: closed; %s", name, oneLine(err))
		reply, err = ctlWarning+oneLine(err), nil
	case err != nil:
		daemonLog.Printf("%s: stopped: %s", name, oneLine(err))
		reply = "error: " + oneLine(err)
	default:
		daemonLog.Printf("%s: closed", name)
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

	name := cfg.Attach.Name
	st := cfg.State
	st.Name = name
	st.PID = os.Getpid()
	st.Frontend = cfg.Frontend.Name()
	st.Started = time.Now()
	if cfg.KernelIO {
		if err := checkIOFlusher(); err != nil {
			return nil, err
		}
		st.IOFlusher = true
		if err := lockedMemory(); err != nil {
			return nil, err
		}
		st.MemoryLocked = true
	}

	ctl, err := net.Listen("unix", controlPath(name))
	if err != nil {
		return nil, fmt.Errorf("cannot create the control socket: %v", err)
	}
	defer ctl.Close()

	dev, err := cfg.Open()
	if err != nil {
		return nil, err
	}
	st.Size = dev.Size()
	st.Claim = claimOf(dev)
	defer func() {
		if ferr := dev.Flush(); ferr != nil {
			if err == nil {
				err = fmt.Errorf("flush: %w", ferr)
			} else if !errors.Is(err, ferr) && !bothLost(err, ferr) {
				daemonLog.Printf("%s: flush: %s", name, oneLine(ferr))
			}
		}
		if cerr := dev.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	att, err := cfg.Frontend.Attach(dev, cfg.Attach)
	if err != nil {
		return nil, err
	}
	st.Device = att.DevicePath()
	st.Extra = att.State()
	if err := writeState(&st); err != nil {
		att.Detach()
		return nil, fmt.Errorf("cannot write the state file: %v", err)
	}
	daemonLog.Printf("%s: %s %s active on %s (frontend %s, pid %d)", name, st.Type, st.Image, st.Device, st.Frontend, st.PID)
	if cfg.Ready != nil {
		cfg.Ready(st.Device)
	}
	return serveUntilStopped(name, ctl, att, dev, sigs)
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
//   - SIGTERM, SIGINT or SIGQUIT detach at once when the device is not in
//     use; while it is, the daemon goes on serving (a stray signal must
//     not take a mounted disk away), logs that it waits, and detaches as
//     soon as the device is released: systemd stops the unit after
//     unmounting what is on it, and SIGKILL after its timeout still ends
//     the daemon;
//   - SIGHUP reopens the log file (logrotate).
func serveUntilStopped(name string, ctl net.Listener, att attachment, dev blockdev.Device, sigs <-chan os.Signal) (net.Conn, error) {
	done := make(chan struct{})
	defer close(done)
	closes := make(chan net.Conn)
	go acceptControl(ctl, closes, done)
	gone := make(chan error, 1)
	go func() { gone <- att.Wait() }()
	kdev := att.DevicePath()
	var poll <-chan time.Time // set once a stop signal waits for release
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				daemonLog.Printf("%s: hangup: %s", name, reopenLog())
				continue
			}
			if !deviceBusy(kdev) {
				daemonLog.Printf("%s: %v, detaching", name, sig)
				return nil, detach(att, dev)
			}
			daemonLog.Printf("%s: %v while %s is in use: serving on, closing once it is released", name, sig, kdev)
			if poll == nil {
				t := time.NewTicker(stopPoll)
				defer t.Stop()
				poll = t.C
			}
		case <-poll:
			if !deviceBusy(kdev) {
				daemonLog.Printf("%s: %s released, detaching", name, kdev)
				return nil, detach(att, dev)
			}
		case conn := <-closes:
			if deviceBusy(kdev) {
				fmt.Fprintln(conn, ctlBusy)
				conn.Close()
				continue
			}
			return conn, detach(att, dev)
		case werr := <-gone:
			// The kernel side went away by itself (nbd-client -d, ublk
			// device deleted): nothing is left to detach.
			daemonLog.Printf("%s: %s went away", name, kdev)
			return nil, werr
		}
	}
}

// detach detaches the kernel device. Acknowledged writes lost earlier have
// failed every flush since; they are taken out of the way first, so that
// the kernel's last flush answers for what is still in flight, and are
// returned (ErrLostWrites) for the closer's warning when nothing else
// fails.
func detach(att attachment, dev blockdev.Device) error {
	lost := takeLostWrites(dev)
	if err := att.Detach(); err != nil {
		return err
	}
	return lost
}

// takeLostWrites returns the lost writes the crypt layer's backend (or dev
// itself) reports, and forgets them: see blockdev.Tracked.TakeLostWrites.
func takeLostWrites(dev blockdev.Device) error {
	if b, ok := dev.(interface{ Backend() blockdev.Device }); ok {
		dev = b.Backend()
	}
	if t, ok := dev.(interface{ TakeLostWrites() error }); ok {
		return t.TakeLostWrites()
	}
	return nil
}

// lockedMemory makes sure that what holds secrets or data in flight is
// locked in memory, and explains why that is enough.
//
// The daemon is in the kernel's block I/O path: under memory pressure the
// kernel writes dirty pages through it. PR_SET_IO_FLUSHER (set by the
// parent) keeps the daemon's own allocations from recursing into that
// writeback, so it cannot wait on itself for memory. What must never be
// swapped out is locked: the key schedule (openCryptDevice locks every
// object the cipher holds) and the buffers of requests in flight, where
// plaintext and ciphertext pass (blockdev.GetBuffer maps them outside the
// Go heap and locks them). The rest — code, the Go runtime, goroutine
// stacks, small heap objects — holds no key; if the kernel reclaims it,
// faulting it back reads the binary or swap, never this volume (swap on a
// luksd volume is not supported, as with nbd-client without -swap), so it
// can be slow but cannot deadlock. mlockall(MCL_FUTURE), used before,
// locked all of it, including the address space the Go runtime reserves:
// 84 MB resident and 1.26 GB VmLck per idle daemon.
func lockedMemory() error {
	blockdev.PutBuffer(blockdev.GetBuffer(1))
	if !blockdev.BuffersLocked() {
		return errors.New("cannot lock the daemon's I/O buffers in memory (mlock; RLIMIT_MEMLOCK too low?)")
	}
	return nil
}

// bothLost reports whether both errors report lost writes (the same ones,
// seen by the frontend's flush and the daemon's last).
func bothLost(a, b error) bool {
	return errors.Is(a, blockdev.ErrLostWrites) && errors.Is(b, blockdev.ErrLostWrites)
}

// claimOf says how the crypt layer's backend is claimed ("O_EXCL", "OFD
// lock"), or "".
func claimOf(dev blockdev.Device) string {
	if b, ok := dev.(interface{ Backend() blockdev.Device }); ok {
		if f, ok := b.Backend().(*blockdev.File); ok {
			return f.Claim()
		}
	}
	return ""
}

// acceptControl reads one command per connection: "close" is handed to the
// daemon's loop, which answers; anything else is refused.
func acceptControl(ctl net.Listener, closes chan<- net.Conn, done <-chan struct{}) {
	for {
		conn, err := ctl.Accept()
		if err != nil {
			return
		}
		go func() {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			conn.SetReadDeadline(time.Time{})
			if err != nil {
				conn.Close()
				return
			}
			switch strings.TrimSpace(line) {
			case "close":
				select {
				case closes <- conn:
				case <-done:
					fmt.Fprintln(conn, "error: the daemon is stopping")
					conn.Close()
				}
			default:
				fmt.Fprintf(conn, "error: unknown command %q\n", strings.TrimSpace(line))
				conn.Close()
			}
		}()
	}
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

// setIOFlusher marks the calling thread PR_SET_IO_FLUSHER. The flag is per
// thread, inherited by fork and clone and kept across execve, so the parent
// sets it on a locked thread right before starting the daemon: every thread
// of the daemon then carries it.
func setIOFlusher() error {
	if err := unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errors.New("cannot become an IO flusher (PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE; run as root)")
		}
		return fmt.Errorf("PR_SET_IO_FLUSHER: %v", err)
	}
	return nil
}

// checkIOFlusher verifies that this thread (and so the daemon, whose
// threads all descend from the first) is an IO flusher.
func checkIOFlusher() error {
	v, err := unix.PrctlRetInt(unix.PR_GET_IO_FLUSHER, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("PR_GET_IO_FLUSHER: %v", err)
	}
	if v != 1 {
		return fmt.Errorf("the daemon is not an IO flusher (PR_GET_IO_FLUSHER read %d)", v)
	}
	return nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
