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
	// (PR_GET_IO_FLUSHER, set by the parent before exec) and lock its
	// memory (mlockall), as a process in the kernel's block I/O path must.
	KernelIO bool
	// Ready is called once the kernel block device exists and the state
	// file is written.
	Ready func(devicePath string)
}

// Replies on the control socket to "close".
const (
	ctlOK   = "ok"
	ctlBusy = "busy"
)

// runDaemon claims the name, attaches the frontend and serves until SIGTERM
// or SIGINT, a "close" on the control socket, or the kernel device going
// away; then it flushes, detaches and removes its state. Errors before Ready
// mean the volume was never activated.
func runDaemon(cfg daemonConfig) error {
	name := cfg.Attach.Name
	lock, err := claimName(name)
	if err != nil {
		return err
	}
	requester, err := serveVolume(cfg)
	releaseName(name, lock)
	if err != nil {
		daemonLog.Printf("%s: stopped: %s", name, oneLine(err))
	} else {
		daemonLog.Printf("%s: closed", name)
	}
	// The closer hears back only once the state is gone.
	if requester != nil {
		if err != nil {
			fmt.Fprintf(requester, "error: %s\n", oneLine(err))
		} else {
			fmt.Fprintln(requester, ctlOK)
		}
		requester.Close()
	}
	return err
}

// serveVolume runs the volume while runDaemon holds its name. It returns
// the control connection that asked to close, if one did.
func serveVolume(cfg daemonConfig) (requester net.Conn, err error) {
	// Caught from the start: a SIGTERM while attaching stops the daemon
	// right after, cleanly, instead of killing it with the device attached.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
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
		if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
			return nil, fmt.Errorf("cannot lock the daemon's memory (mlockall): %v", err)
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
	defer func() {
		if ferr := dev.Flush(); ferr != nil && err == nil {
			err = fmt.Errorf("flush: %v", ferr)
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

	done := make(chan struct{})
	defer close(done)
	closes := make(chan net.Conn)
	go acceptControl(ctl, closes, done)
	gone := make(chan error, 1)
	go func() { gone <- att.Wait() }()

	daemonLog.Printf("%s: %s %s active on %s (frontend %s, pid %d)", name, st.Type, st.Image, st.Device, st.Frontend, st.PID)
	if cfg.Ready != nil {
		cfg.Ready(st.Device)
	}

	for {
		select {
		case sig := <-sigs:
			daemonLog.Printf("%s: %v, detaching", name, sig)
			return nil, att.Detach()
		case conn := <-closes:
			if deviceBusy(st.Device) {
				fmt.Fprintln(conn, ctlBusy)
				conn.Close()
				continue
			}
			return conn, att.Detach()
		case werr := <-gone:
			// The kernel side went away by itself (nbd-client -d, ublk
			// device deleted): nothing is left to detach.
			daemonLog.Printf("%s: %s went away", name, st.Device)
			return nil, werr
		}
	}
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
func deviceBusy(path string) bool {
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
