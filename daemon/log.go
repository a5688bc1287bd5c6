package daemon

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Log is the daemon's log: one line per event, the volume attached, each
// kernel connection's end, backend I/O errors, the volume detached and
// why. In the foreground (systemd) the lines go to standard error, i.e.
// the journal. A detached daemon has no terminal: its standard error —
// where the Go runtime would also write a crash — is the file
// logPath(name), which outlives the daemon's state folder so the reason it
// stopped can still be read after it is gone; SIGHUP reopens it.
var Log = log.New(os.Stderr, "", log.LstdFlags)

// logPath is the detached daemon's log file for volume name.
func logPath(name string) string { return filepath.Join(RunDir(), name+".log") }

// logFileOf is the volume whose log file standard error points at, once
// logToFile did it.
var logFileOf string

// logFD is standard error; tests point logToFile elsewhere.
var logFD = 2

// logToFile points standard error (file descriptor 2) at the volume's log
// file, appending.
func logToFile(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(RunDir(), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(logPath(name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Dup3(int(f.Fd()), logFD, 0); err != nil {
		return fmt.Errorf("cannot log to %s: %v", logPath(name), err)
	}
	logFileOf = name
	return nil
}

// reopenLog opens the log file again (after logrotate moved it) and says
// what it did.
func reopenLog() string {
	if logFileOf == "" {
		return "logging to standard error, nothing to reopen"
	}
	if err := logToFile(logFileOf); err != nil {
		return err.Error()
	}
	return "reopened " + logPath(logFileOf)
}

// dumpStacksOnSignal writes every goroutine's stack to the log each time
// the daemon gets SIGUSR1, and serves on: what a request or a job that
// hangs waits for, without stopping the device under its users (Go's own
// dump, SIGQUIT, would end the process). It runs apart from the serving
// loop, so a loop that is stuck still answers. stop ends it.
func dumpStacksOnSignal() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				Log.Printf("SIGUSR1: the stacks of every goroutine:\n%s", allStacks())
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// allStacks is runtime.Stack of every goroutine, however many there are.
func allStacks() []byte {
	for n := 1 << 16; ; n *= 2 {
		buf := make([]byte, n)
		if m := runtime.Stack(buf, true); m < n {
			return buf[:m]
		}
	}
}
