package daemon

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon/daemontest"
	"golang.org/x/sys/unix"
)

// captureLog sends the daemon's log to a buffer for the test.
func captureLog(t *testing.T) *daemontest.LogBuffer {
	var b daemontest.LogBuffer
	Log.SetOutput(&b)
	t.Cleanup(func() { Log.SetOutput(os.Stderr) })
	return &b
}

// fakeBusy makes deviceBusy report busy until the returned flag is
// cleared, and polls fast.
func fakeBusy(t *testing.T) *atomic.Bool {
	var busy atomic.Bool
	busy.Store(true)
	oldBusy, oldPoll := deviceBusy, stopPoll
	deviceBusy = func(string) bool { return busy.Load() }
	stopPoll = 10 * time.Millisecond
	t.Cleanup(func() { deviceBusy, stopPoll = oldBusy, oldPoll })
	return &busy
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SIGTERM, SIGINT and SIGQUIT while the device is in use (mounted) leave
// it serving; the daemon closes once it is released.
func TestDaemonStopSignalWaitsWhileInUse(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Setenv("LUKSD_RUN_DIR", t.TempDir())
			logged := captureLog(t)
			busy := fakeBusy(t)
			fe, dev, done := startFake(t, "held")
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the daemon to log that it waits", func() bool {
				return strings.Contains(logged.String(), "is in use: serving on, closing once it is released")
			})
			time.Sleep(100 * time.Millisecond) // ten polls
			if fe.Last().Detaches() != 0 || !Alive("held") {
				t.Fatalf("%v took the device away while it was in use", sig)
			}
			// Still serving: a write goes through.
			if _, err := fe.Last().Dev.WriteAt([]byte("after the signal"), 4096); err != nil {
				t.Fatal(err)
			}
			busy.Store(false)
			if err := waitDaemon(t, done); err != nil {
				t.Fatalf("daemon: %v", err)
			}
			if fe.Last().Detaches() != 1 || Alive("held") {
				t.Fatal("the daemon did not detach once the device was released")
			}
			if flushes, closed := dev.Flushes(), dev.Closed(); flushes == 0 || !closed {
				t.Fatalf("device flushed %d times, closed %v", flushes, closed)
			}
			if !bytes.Contains(dev.Bytes(), []byte("after the signal")) {
				t.Fatal("the write made after the signal is not on the device")
			}
			if !strings.Contains(logged.String(), "released, detaching") {
				t.Fatalf("log: %s", logged)
			}
		})
	}
}

// SIGHUP reopens the log file (logrotate moved it) and changes nothing
// else.
func TestDaemonSIGHUPReopensLog(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	logged := captureLog(t)
	spare, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	oldFD := logFD
	logFD = spare
	t.Cleanup(func() { logFD, logFileOf = oldFD, ""; unix.Close(spare) })
	if err := logToFile("hup"); err != nil {
		t.Fatal(err)
	}
	_, _, done := startFake(t, "hup")
	if err := os.Rename(logPath("hup"), logPath("hup")+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log to be reopened", func() bool {
		_, err := os.Stat(logPath("hup"))
		return err == nil && strings.Contains(logged.String(), "hangup: reopened "+logPath("hup"))
	})
	if !Alive("hup") {
		t.Fatal("SIGHUP stopped the daemon")
	}
	stopVolume(t, "hup", done)
}

// SIGUSR1 logs every goroutine's stack, the serving loop's included, and
// the daemon serves on.
func TestDaemonSIGUSR1LogsStacks(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	logged := captureLog(t)
	fe, _, done := startFake(t, "stacks")
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stacks in the log", func() bool {
		return strings.Contains(logged.String(), "daemon.serveUntilStopped(")
	})
	if !strings.Contains(logged.String(), "SIGUSR1: the stacks of every goroutine:") {
		t.Fatalf("log: %s", logged.String())
	}
	if _, err := fe.Last().Dev.WriteAt([]byte("after SIGUSR1"), 0); err != nil || !Alive("stacks") {
		t.Fatalf("the daemon stopped serving after SIGUSR1: %v", err)
	}
	if _, err := Close("stacks"); err != nil {
		t.Fatal(err)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
}
