package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/luksd/luksd/daemon/frontend"
)

// The control socket, RunDir()/NAME/control, takes one command line per
// connection and answers one line. "close": the daemon detaches unless its
// device is in use or suspended, then answers ctlOK, ctlBusy, ctlWarning
// and why, or "error: " and why. "close deferred" is close, but a device
// in use is detached once it is released (answer ctlDeferred), as
// device-mapper's deferred removal; "cancel-deferred" takes that back. "suspend" and "resume N" are suspend.go's, "resize N" resize.go's. A new command (an online job
// such as reencrypt: start it, ask how far it is) is one more case in
// acceptControl and a function here that sends it.
const (
	ctlOK       = "ok"
	ctlBusy     = "busy"
	ctlWarning  = "warning: "
	ctlDeferred = "deferred"
)

// Close requests on the control socket.
const (
	ctlClose          = "close"
	ctlCloseDeferred  = "close deferred"
	ctlCancelDeferred = "cancel-deferred"
)

// closeRequest is a close request for the daemon's loop, which answers
// on conn.
type closeRequest struct {
	conn net.Conn
	cmd  string // ctlClose, ctlCloseDeferred or ctlCancelDeferred
}

// acceptControl reads one command per connection: "close" is handed to the
// daemon's loop, which answers; anything else is refused.
func acceptControl(ctl net.Listener, closes chan<- closeRequest, done <-chan struct{}, keys *keyControl, live *liveControl, online *onlineJob) {
	for {
		conn, err := ctl.Accept()
		if err != nil {
			return
		}
		go func() {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			line, err := r.ReadString('\n')
			if err != nil {
				conn.Close()
				return
			}
			if keys != nil && keys.answerKeyCommand(conn, r, strings.TrimSpace(line)) {
				return
			}
			if online.answer(conn, r, strings.TrimSpace(line)) {
				return
			}
			if live != nil && live.answer(conn, strings.TrimSpace(line)) {
				return
			}
			conn.SetReadDeadline(time.Time{})
			switch cmd := strings.TrimSpace(line); cmd {
			case ctlClose, ctlCloseDeferred, ctlCancelDeferred:
				select {
				case closes <- closeRequest{conn, cmd}:
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

// Close asks name's daemon to flush, detach and exit, and waits until it
// has removed its state. warning, when not "", is the daemon's: closed,
// but writes that failed earlier were never written again
// (blockdev.ErrLostWrites). No daemon for name is ErrNotActive; a device
// in use (mounted, held) is ErrBusy, and stays.
func Close(name string) (warning string, err error) {
	warning, _, err = closeWith(name, ctlClose)
	return warning, err
}

// CloseDeferred is Close, but a device in use is closed once it is
// released: deferred reports that it is still active until then.
func CloseDeferred(name string) (warning string, deferred bool, err error) {
	return closeWith(name, ctlCloseDeferred)
}

// CancelDeferred takes back a deferred close of name.
func CancelDeferred(name string) error { return askLive(name, ctlCancelDeferred) }

// closeWith sends cmd (ctlClose or ctlCloseDeferred) and waits until the
// daemon is gone, unless it deferred the close.
func closeWith(name, cmd string) (warning string, deferred bool, err error) {
	if !Alive(name) {
		return "", false, errorf(ErrNotActive, "Device %s is not active.", name)
	}
	pid := 0
	if st, err := readState(name); err == nil {
		pid = st.PID
	}
	reply, err := askDaemon(name, cmd)
	if err != nil {
		// The control socket is gone or mute: fall back to SIGTERM.
		st, serr := readState(name)
		if serr != nil || st.PID <= 0 {
			if !Alive(name) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
		}
		if kerr := syscall.Kill(st.PID, syscall.SIGTERM); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			return "", false, fmt.Errorf("cannot stop the daemon of %s (pid %d): %v", name, st.PID, kerr)
		}
		reply = ctlOK
	}
	switch {
	case reply == ctlDeferred:
		return "", true, nil
	case reply == ctlBusy:
		return "", false, errorf(ErrBusy, "Device %s is still in use.", name)
	case strings.HasPrefix(reply, ctlWarning):
		// Closed; writes that failed earlier were never written again.
		warning = strings.TrimPrefix(reply, ctlWarning)
	case reply == ctlOK, reply == "error: the daemon is stopping":
	case strings.HasPrefix(reply, "error: "):
		return "", false, fmt.Errorf("closing %s: %s", name, strings.TrimPrefix(reply, "error: "))
	default:
		return "", false, fmt.Errorf("closing %s: unexpected reply %q", name, reply)
	}
	// The daemon releases its lock as its last act, then exits.
	for Alive(name) {
		time.Sleep(20 * time.Millisecond)
	}
	if pid > 0 && pid != os.Getpid() {
		for deadline := time.Now().Add(10 * time.Second); processRunning(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return warning, false, nil
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// askDaemon sends one command on name's control socket and returns the
// reply line. Closing waits for the flush, which may take a while.
func askDaemon(name, cmd string) (string, error) { return askDaemonWith(name, cmd, nil) }

// askDaemonWith is askDaemon with payload sent after the command line.
func askDaemonWith(name, cmd string, payload []byte) (string, error) {
	conn, err := net.DialTimeout("unix", controlPath(name), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, cmd); err != nil {
		return "", err
	}
	if len(payload) > 0 {
		// (A write of nothing would still fail with EPIPE once the
		// daemon has answered and hung up.)
		if _, err := conn.Write(payload); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return "", err
		}
		if line == "" {
			return "", fmt.Errorf("the daemon hung up: %v", err)
		}
	}
	return strings.TrimSpace(line), nil
}

// CleanStale removes what a daemon of name that died left: its state, and
// the kernel device its frontend still holds (frontend.Frontend.Release:
// a /dev/nbdN with dead connections, a ublk device waiting for recovery).
// It reports whether there was anything to remove; err is the frontend's
// failure to release its device, the state is removed all the same.
func CleanStale(name string) (bool, error) {
	st, err := readState(name)
	if err != nil {
		return false, nil
	}
	lock, err := claimName(name)
	if err != nil {
		return false, nil
	}
	defer releaseName(name, lock)
	if f, ok := frontend.Lookup(st.Frontend); ok {
		err = f.Release(name, st.Device, st.Extra)
	}
	// A mapping still mounted goes once it is unmounted.
	if merr := removeMapping(st, true); err == nil {
		err = merr
	}
	return true, err
}

// CheckFree fails with ErrExists while a daemon runs name. One that has
// died but whose last threads still hold the lock (right after SIGKILL)
// is waited for, a little.
func CheckFree(name string) error {
	if Alive(name) && !lockReleasedByDyingDaemon(name) {
		return errorf(ErrExists, "Device %s already exists.", name)
	}
	return nil
}

// lockReleasedByDyingDaemon waits a little for name's lock when the daemon
// holding it is already dead (a zombie whose last threads are still
// exiting, e.g. right after SIGKILL), and reports whether it was released.
func lockReleasedByDyingDaemon(name string) bool {
	st, err := readState(name)
	if err != nil || st.PID <= 0 || processRunning(st.PID) {
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if !Alive(name) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
