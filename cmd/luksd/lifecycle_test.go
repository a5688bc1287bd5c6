package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// memDevice is an in-memory blockdev.Device that counts flushes.
type memDevice struct {
	mu      sync.Mutex
	data    []byte
	flushes int
	closed  bool
}

func newMemDevice(size int) *memDevice { return &memDevice{data: make([]byte, size)} }

func (m *memDevice) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, os.ErrClosed
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	return copy(p, m.data[off:]), nil
}

func (m *memDevice) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, os.ErrClosed
	}
	return copy(m.data[off:], p), nil
}

func (m *memDevice) Size() int64 { return int64(len(m.data)) }

func (m *memDevice) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes++
	return nil
}

func (m *memDevice) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *memDevice) state() (flushes int, closed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushes, m.closed
}

// fakeFrontend attaches nothing: its attachment waits until detached or
// until the test makes the "kernel side" vanish.
type fakeFrontend struct {
	mu       sync.Mutex
	last     *fakeAttachment
	attachOK error
}

func (f *fakeFrontend) Name() string     { return "fake" }
func (f *fakeFrontend) Available() error { return nil }

func (f *fakeFrontend) Attach(dev blockdev.Device, opts attachOptions) (attachment, error) {
	if f.attachOK != nil {
		return nil, f.attachOK
	}
	a := &fakeAttachment{dev: dev, opts: opts, gone: make(chan struct{})}
	f.mu.Lock()
	f.last = a
	f.mu.Unlock()
	return a, nil
}

func (f *fakeFrontend) attachment() *fakeAttachment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

type fakeAttachment struct {
	dev      blockdev.Device
	opts     attachOptions
	gone     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	detached int
	// asKernel makes Detach's flush fail the way the kernel reports it:
	// a bare EIO, whatever the device's error was (NBD's sync).
	asKernel atomic.Bool
}

func (a *fakeAttachment) DevicePath() string { return "/nonexistent/fake-" + a.opts.Name }
func (a *fakeAttachment) Wait() error        { <-a.gone; return nil }
func (a *fakeAttachment) vanish()            { a.once.Do(func() { close(a.gone) }) }
func (a *fakeAttachment) State() map[string]string {
	return map[string]string{"fake-id": "7"}
}

func (a *fakeAttachment) Detach() error {
	a.mu.Lock()
	a.detached++
	a.mu.Unlock()
	a.vanish()
	err := a.dev.Flush()
	if err != nil && a.asKernel.Load() {
		return syscall.EIO
	}
	return err
}

func (a *fakeAttachment) detachCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.detached
}

// startFake runs a daemon for name over a fresh memDevice with the fake
// frontend and waits until it is ready.
func startFake(t *testing.T, name string) (*fakeFrontend, *memDevice, chan error) {
	t.Helper()
	dev := newMemDevice(1 << 20)
	fe, done := startFakeDev(t, name, dev)
	return fe, dev, done
}

// startFakeDev is startFake over dev.
func startFakeDev(t *testing.T, name string, dev blockdev.Device) (*fakeFrontend, chan error) {
	t.Helper()
	fe := &fakeFrontend{}
	img := zeroFile(t, t.TempDir(), name+".img", 4096)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runDaemon(daemonConfig{
			Frontend: fe,
			Attach:   attachOptions{Name: name, BlockSize: 4096},
			State:    volumeState{Image: img, Type: "LUKS2", Cipher: "aes-xts-plain64", KeySize: 64, SectorSize: 4096, Offset: 16 << 20},
			Open:     func() (blockdev.Device, error) { return dev, nil },
			Ready:    func(p string) { ready <- p },
		})
	}()
	select {
	case p := <-ready:
		if p != "/nonexistent/fake-"+name {
			t.Fatalf("ready with %q", p)
		}
	case err := <-done:
		t.Fatalf("daemon failed before ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready")
	}
	return fe, done
}

func waitDaemon(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop")
		return nil
	}
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return exitParams
	}
	return exitOK
}

func TestDaemonOpenStatusClose(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe, dev, done := startFake(t, "vol")

	st, err := activeState("vol")
	if err != nil || st == nil {
		t.Fatalf("activeState = %v, %v; want the running volume", st, err)
	}
	if st.PID != os.Getpid() || st.Frontend != "fake" || st.Device != "/nonexistent/fake-vol" ||
		st.Size != 1<<20 || st.Extra["fake-id"] != "7" || st.Cipher != "aes-xts-plain64" || st.IOFlusher {
		t.Fatalf("state %+v", st)
	}
	if fe.attachment().opts.BlockSize != 4096 {
		t.Fatalf("attach options %+v", fe.attachment().opts)
	}

	// A second daemon for the same name is refused with exit code 5.
	err = runDaemon(daemonConfig{Frontend: fe, Attach: attachOptions{Name: "vol"},
		Open: func() (blockdev.Device, error) { t.Fatal("second daemon opened the volume"); return nil, nil }})
	if exitCode(err) != exitBusy {
		t.Fatalf("second daemon: %v (exit %d), want exit 5", err, exitCode(err))
	}

	if err := closeVolume("vol"); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if n := fe.attachment().detachCount(); n != 1 {
		t.Fatalf("detached %d times", n)
	}
	if flushes, closed := dev.state(); flushes == 0 || !closed {
		t.Fatalf("device flushed %d times, closed %v", flushes, closed)
	}
	if _, err := os.Stat(stateDir("vol")); !os.IsNotExist(err) {
		t.Fatalf("state folder left behind: %v", err)
	}
	if err := closeVolume("vol"); exitCode(err) != exitDevice {
		t.Fatalf("closing an inactive volume: %v, want exit 4", err)
	}
}

func TestDaemonStopsOnSIGTERM(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe, dev, done := startFake(t, "term")
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon after SIGTERM: %v", err)
	}
	if fe.attachment().detachCount() != 1 {
		t.Fatal("SIGTERM did not detach")
	}
	if _, closed := dev.state(); !closed {
		t.Fatal("device not closed")
	}
	if daemonAlive("term") {
		t.Fatal("still active after SIGTERM")
	}
}

func TestDaemonEndsWhenKernelSideGoes(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe, dev, done := startFake(t, "gone")
	fe.attachment().vanish()
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if flushes, closed := dev.state(); flushes == 0 || !closed {
		t.Fatalf("device flushed %d times, closed %v", flushes, closed)
	}
	if _, err := os.Stat(stateDir("gone")); !os.IsNotExist(err) {
		t.Fatalf("state folder left behind: %v", err)
	}
}

func TestDaemonAttachFailure(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dev := newMemDevice(4096)
	fe := &fakeFrontend{attachOK: errors.New("no such kernel device")}
	err := runDaemon(daemonConfig{Frontend: fe, Attach: attachOptions{Name: "bad"},
		Open:  func() (blockdev.Device, error) { return dev, nil },
		Ready: func(string) { t.Error("ready after a failed attach") }})
	if err == nil || err.Error() != "no such kernel device" {
		t.Fatalf("runDaemon = %v", err)
	}
	if _, closed := dev.state(); !closed {
		t.Fatal("device left open")
	}
	if _, err := os.Stat(filepath.Join(runDir(), "bad")); !os.IsNotExist(err) {
		t.Fatalf("state folder left behind: %v", err)
	}
}

func TestControlRejectsUnknownCommand(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	_, _, done := startFake(t, "ctl")
	reply, err := askDaemon("ctl", "explode")
	if err != nil || reply != `error: unknown command "explode"` {
		t.Fatalf("reply %q, %v", reply, err)
	}
	if !daemonAlive("ctl") {
		t.Fatal("an unknown command stopped the daemon")
	}
	if err := closeVolume("ctl"); err != nil {
		t.Fatal(err)
	}
	if err := waitDaemon(t, done); err != nil {
		t.Fatal(err)
	}
}
