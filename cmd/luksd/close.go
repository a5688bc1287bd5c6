package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/luksd/luksd/nbd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "close",
		Aliases:   []string{"luksClose"},
		Usage:     "flush, detach and stop an active volume",
		ArgsUsage: "NAME",
		Action:    closeAction,
	})
}

func closeAction(c *cli.Context) error {
	arg, name, ok, err := volumeArg(c)
	if err != nil {
		return err
	}
	if !ok {
		return exitf(exitDevice, "Device %s is not active.", arg)
	}
	return closeVolume(name)
}

// closeVolume asks name's daemon to flush, detach and exit, and waits until
// it has removed its state.
func closeVolume(name string) error {
	if !daemonAlive(name) {
		if cleanStale(name) {
			return nil
		}
		return exitf(exitDevice, "Device %s is not active.", name)
	}
	pid := 0
	if st, err := readState(name); err == nil {
		pid = st.PID
	}
	reply, err := askDaemon(name, "close")
	if err != nil {
		// The control socket is gone or mute: fall back to SIGTERM.
		st, serr := readState(name)
		if serr != nil || st.PID <= 0 {
			if !daemonAlive(name) {
				return nil
			}
			return fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
		}
		if kerr := syscall.Kill(st.PID, syscall.SIGTERM); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			return fmt.Errorf("cannot stop the daemon of %s (pid %d): %v", name, st.PID, kerr)
		}
		reply = ctlOK
	}
	switch {
	case reply == ctlBusy:
		return exitf(exitBusy, "Device %s is still in use.", name)
	case strings.HasPrefix(reply, ctlWarning):
		// Closed; writes that failed earlier were never written again.
		fmt.Fprintf(os.Stderr, "WARNING: %s: %s\n", name, strings.TrimPrefix(reply, ctlWarning))
	case reply == ctlOK, reply == "error: the daemon is stopping":
	case strings.HasPrefix(reply, "error: "):
		return fmt.Errorf("closing %s: %s", name, strings.TrimPrefix(reply, "error: "))
	default:
		return fmt.Errorf("closing %s: unexpected reply %q", name, reply)
	}
	// The daemon releases its lock as its last act, then exits.
	for daemonAlive(name) {
		time.Sleep(20 * time.Millisecond)
	}
	if pid > 0 && pid != os.Getpid() {
		for deadline := time.Now().Add(10 * time.Second); processRunning(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
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
func askDaemon(name, cmd string) (string, error) {
	conn, err := net.DialTimeout("unix", controlPath(name), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, cmd); err != nil {
		return "", err
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

// cleanStale removes what a daemon that died left of name: its state and,
// for nbd, the kernel device still configured with dead connections (only
// when /sys/block/nbdN/backend shows it is this volume's); for ublk, the
// device the kernel keeps waiting for recovery. It reports
// whether there was anything to remove.
func cleanStale(name string) bool {
	st, err := readState(name)
	if err != nil {
		return false
	}
	lock, err := claimName(name)
	if err != nil {
		return false
	}
	defer releaseName(name, lock)
	switch st.Frontend {
	case "nbd":
		if idx, err := nbd.ParseDevicePath(st.Device); err == nil {
			b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/backend", idx))
			if err == nil && strings.TrimSpace(string(b)) == nbdBackendID(name) {
				if err := nbd.Disconnect(idx); err != nil {
					fmt.Fprintf(os.Stderr, "%v\n", err)
				}
			}
		}
	case "ublk":
		// The kernel holds a dead daemon's I/O for recovery; deleting the
		// device fails it, so a lazy unmount or a waiting sync can finish.
		if err := cleanStaleUblk(st.Device, st.Extra); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
		}
	}
	return true
}
