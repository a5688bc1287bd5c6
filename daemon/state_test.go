package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

func sampleState() *State {
	return &State{
		Name: "data", Device: "/dev/nbd3", Frontend: "nbd", PID: 4242,
		Image: "/srv/data.img", Header: "/srv/data.hdr", Type: "LUKS2",
		UUID: "0f6a0d6e-7b43-4c8e-9e44-4b0c1f7f2b11", Cipher: "xchacha12,aes-adiantum-plain64",
		KeySize: 32, KeySlot: 1, SectorSize: 4096, Offset: 16 << 20, Size: 1 << 30,
		ReadOnly: true, AllowDiscards: true, IOFlusher: true, MemoryLocked: true, Claim: "O_EXCL",
		Started: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC),
		Extra:   map[string]string{"nbd-index": "3", "nbd-connections": "2"},
	}
}

func TestStateRoundTrip(t *testing.T) {
	b := testtool.RoundTrip(t, sampleState(), (*State).marshal, parseState)
	text := string(b)
	for _, line := range []string{"device=/dev/nbd3\n", "mode=readonly\n", "pid=4242\n", "nbd-index=3\n", "sector-size=4096\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("state file lacks %q:\n%s", line, text)
		}
	}
}

func TestStateRefusesWhatCannotRoundTrip(t *testing.T) {
	s := sampleState()
	s.Image = "/srv/evil\nname.img"
	if _, err := s.marshal(); err == nil {
		t.Error("a newline in a path was written")
	}
	s = sampleState()
	s.Extra["pid"] = "1"
	if _, err := s.marshal(); err == nil {
		t.Error("a frontend key shadowed a fixed key")
	}
	for _, bad := range []string{"name=x\n", "pid=12\n", "name=x\npid=zz\n", "name=x\npid=1\ngarbage\n"} {
		if _, err := parseState([]byte(bad)); err == nil {
			t.Errorf("parseState(%q) accepted", bad)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"data", "vol-1", "a.b_c", strings.Repeat("x", 127)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "tab\t", strings.Repeat("x", 128)} {
		if err := ValidName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalid (exit 1)", bad, err)
		}
	}
}

// The lock, not the files, says whether a volume is active; claiming a
// name cleans what a dead daemon left.
func TestClaimNameLockAndStaleFiles(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	if err := os.MkdirAll(stateDir("v"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := sampleState()
	stale.Name = "v"
	if err := writeState(stale); err != nil {
		t.Fatal(err)
	}
	if Alive("v") {
		t.Fatal("leftover files count as an active daemon")
	}
	if s, err := Active("v"); s != nil || err != nil {
		t.Fatalf("Active of a dead daemon = %v, %v", s, err)
	}
	lock, err := claimName("v")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stateFile("v")); !os.IsNotExist(err) {
		t.Fatal("claim kept the dead daemon's state file")
	}
	if !Alive("v") {
		t.Fatal("a held lock does not count as active")
	}
	if _, err := claimName("v"); !errors.Is(err, ErrExists) {
		t.Fatalf("second claim: %v, want ErrExists (exit 5)", err)
	}
	releaseName("v", lock)
	if Alive("v") {
		t.Fatal("still active after release")
	}
	if _, err := os.Stat(stateDir("v")); !os.IsNotExist(err) {
		t.Fatal("release left the folder")
	}
}

func TestVolumeName(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	lock, err := claimName("named")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseName("named", lock)
	st := sampleState()
	st.Name, st.Device = "named", "/dev/nbd9"
	if err := writeState(st); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string]string{"named": "named", "/dev/mapper/named": "named", "/dev/nbd9": "named", "other": "other"} {
		if got, ok, err := ResolveName(arg); err != nil || !ok || got != want {
			t.Errorf("ResolveName(%q) = %q, %v, %v; want %q", arg, got, ok, err, want)
		}
	}
	if _, ok, err := ResolveName("/dev/nbd1"); ok || err != nil {
		t.Errorf("ResolveName of an unused device: ok %v, %v", ok, err)
	}
	if _, _, err := ResolveName("/dev/mapper/a b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad mapper name: %v", err)
	}
}
