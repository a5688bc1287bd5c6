package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/daemon/daemontest"
	"github.com/luksd/luksd/daemon/frontend"
	"github.com/luksd/luksd/keyring"
)

// startFake runs a daemon for name over a fresh devtest.Mem with the fake
// frontend and waits until it is ready.
func startFake(t *testing.T, name string) (*daemontest.Fake, *devtest.Mem, chan error) {
	t.Helper()
	dev := devtest.NewMem(1 << 20)
	fe, done := startFakeDev(t, name, opened{dev: dev})
	return fe, dev, done
}

// startFakeDev is startFake over dev.
func startFakeDev(t *testing.T, name string, dev opened) (*daemontest.Fake, chan error) {
	t.Helper()
	fe := &daemontest.Fake{}
	img := filepath.Join(t.TempDir(), name+".img")
	if err := os.WriteFile(img, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runDaemon(daemonConfig{
			Frontend: fe,
			Attach:   frontend.Options{Name: name, BlockSize: 4096},
			State:    State{Image: img, Type: "LUKS2", Cipher: "aes-xts-plain64", KeySize: 64, SectorSize: 4096, Offset: 16 << 20},
			Open:     func() (opened, error) { return dev, nil },
			Ready:    func(p string) { ready <- p },
		})
	}()
	if p := daemontest.WaitReady(t, ready, done); p != "/nonexistent/fake-"+name {
		t.Fatalf("ready with %q", p)
	}
	return fe, done
}

func waitDaemon(t *testing.T, done chan error) error { return daemontest.Wait(t, done) }

// stopVolume closes volume name and waits until its daemon ends.
func stopVolume(t *testing.T, name string, done chan error) {
	t.Helper()
	daemontest.Stop(t, func() error { _, err := Close(name); return err }, done)
}

func TestDaemonOpenStatusClose(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe, dev, done := startFake(t, "vol")

	st, err := Active("vol")
	if err != nil || st == nil {
		t.Fatalf("activeState = %v, %v; want the running volume", st, err)
	}
	if st.PID != os.Getpid() || st.Frontend != "fake" || st.Device != "/nonexistent/fake-vol" ||
		st.Size != 1<<20 || st.Extra["fake-id"] != "7" || st.Cipher != "aes-xts-plain64" || st.IOFlusher {
		t.Fatalf("state %+v", st)
	}
	if fe.Last().Opts.BlockSize != 4096 {
		t.Fatalf("attach options %+v", fe.Last().Opts)
	}

	// A second daemon for the same name is refused (ErrExists: exit 5).
	err = runDaemon(daemonConfig{Frontend: fe, Attach: frontend.Options{Name: "vol"},
		Open: func() (opened, error) { t.Fatal("second daemon opened the volume"); return opened{}, nil }})
	if !errors.Is(err, ErrExists) || err.Error() != "Device vol already exists." {
		t.Fatalf("second daemon: %v, want ErrExists", err)
	}

	stopVolume(t, "vol", done)
	if n := fe.Last().Detaches(); n != 1 {
		t.Fatalf("detached %d times", n)
	}
	if flushes, closed := dev.Flushes(), dev.Closed(); flushes == 0 || !closed {
		t.Fatalf("device flushed %d times, closed %v", flushes, closed)
	}
	if _, err := os.Stat(stateDir("vol")); !os.IsNotExist(err) {
		t.Fatalf("state folder left behind: %v", err)
	}
	if _, err := Close("vol"); !errors.Is(err, ErrNotActive) {
		t.Fatalf("closing an inactive volume: %v, want ErrNotActive (exit 4)", err)
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
	if fe.Last().Detaches() != 1 {
		t.Fatal("SIGTERM did not detach")
	}
	if !dev.Closed() {
		t.Fatal("device not closed")
	}
	if Alive("term") {
		t.Fatal("still active after SIGTERM")
	}
}

func TestDaemonEndsWhenKernelSideGoes(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe, dev, done := startFake(t, "gone")
	fe.Last().Vanish()
	if err := waitDaemon(t, done); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if flushes, closed := dev.Flushes(), dev.Closed(); flushes == 0 || !closed {
		t.Fatalf("device flushed %d times, closed %v", flushes, closed)
	}
	if _, err := os.Stat(stateDir("gone")); !os.IsNotExist(err) {
		t.Fatalf("state folder left behind: %v", err)
	}
}

func TestDaemonAttachFailure(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dev := devtest.NewMem(4096)
	fe := &daemontest.Fake{AttachErr: errors.New("no such kernel device")}
	err := runDaemon(daemonConfig{Frontend: fe, Attach: frontend.Options{Name: "bad"},
		Open:  func() (opened, error) { return opened{dev: dev}, nil },
		Ready: func(string) { t.Error("ready after a failed attach") }})
	if err == nil || err.Error() != "no such kernel device" {
		t.Fatalf("runDaemon = %v", err)
	}
	if !dev.Closed() {
		t.Fatal("device left open")
	}
	if _, err := os.Stat(filepath.Join(RunDir(), "bad")); !os.IsNotExist(err) {
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
	if !Alive("ctl") {
		t.Fatal("an unknown command stopped the daemon")
	}
	stopVolume(t, "ctl", done)
}

// TestRunReadsNoHeader: Run takes the volume from its Spec alone. The data
// device here holds no LUKS header at all; the daemon serves the segment
// the spec describes, encrypted on disk where the spec puts it.
func TestRunReadsNoHeader(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	fe := &daemontest.Fake{}
	frontend.Register(fe)
	key, err := keyring.FromBytes(bytes.Repeat([]byte{7}, 64))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "bare", Location: img, Header: "/nonexistent/header", Type: "LUKS2",
		Segment: Segment{Cipher: "aes-xts-plain64", Offset: 1 << 20, SectorSize: 4096, KeySize: 64},
		Options: Options{Frontend: fe.Name(), AllowDiscards: true}}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(spec, key, RunOptions{Ready: func(d string) { ready <- d }}) }()
	daemontest.WaitReady(t, ready, done)
	if key.Len() != 0 {
		t.Error("the key was not wiped once the crypt layer had it")
	}
	// The frontend gets the crypt layer itself, and so what it declares.
	want := blockdev.Caps{Trim: true, WriteZeroes: true, FUA: true, BlockSize: 4096}
	if got := blockdev.CapsOf(fe.Last().Dev); got != want {
		t.Errorf("the frontend sees caps %+v, want the crypt layer's %+v", got, want)
	}
	st, err := Active("bare")
	if err != nil || st == nil || st.Size != 2<<20 || st.Claim != "OFD lock" || st.Header != "/nonexistent/header" {
		t.Fatalf("state %+v, %v", st, err)
	}
	plain := bytes.Repeat([]byte("plaintext"), 456)[:4096]
	if _, err := fe.Last().Dev.WriteAt(plain, 0); err != nil {
		t.Fatal(err)
	}
	stopVolume(t, "bare", done)
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, plain[:64]) || bytes.Equal(raw[1<<20:1<<20+4096], make([]byte, 4096)) {
		t.Fatal("the segment does not hold the ciphertext at its offset")
	}
}
