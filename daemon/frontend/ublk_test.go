package frontend

import (
	"os"
	"strings"
	"testing"
)

func TestParseUblkID(t *testing.T) {
	good := map[string]int{"0": 0, "7": 7, "ublkb3": 3, "/dev/ublkb12": 12, "/dev/ublkc5": 5}
	for in, want := range good {
		got, err := parseUblkID(in)
		if err != nil || got != want {
			t.Errorf("parseUblkID(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "/dev/nbd0", "ublkb", "ublkbx", "99999999"} {
		if _, err := parseUblkID(in); err == nil {
			t.Errorf("parseUblkID(%q) accepted", in)
		}
	}
}

func TestUblkFrontendRegistered(t *testing.T) {
	f, ok := Lookup("ublk")
	if !ok {
		t.Fatal(`no "ublk" frontend registered`)
	}
	if f.Name() != "ublk" {
		t.Errorf("Name() = %q", f.Name())
	}
}

// On a kernel without ublk, Available says so in one line; where it
// succeeds, the control node exists.
func TestUblkAvailable(t *testing.T) {
	f, _ := Lookup("ublk")
	err := f.Available()
	if err == nil {
		if _, serr := os.Stat(f.Caps().Node); serr != nil {
			t.Fatalf("Available() = nil but %s: %v", f.Caps().Node, serr)
		}
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, "ublk") || strings.Contains(msg, "\n") {
		t.Errorf("Available() error is not one line about ublk: %q", msg)
	}
}

func TestUblkRecoverNeedsID(t *testing.T) {
	_, err := ublkFrontend{}.Attach(nil, Options{Name: "x", Recover: true})
	if err == nil {
		t.Fatal("recovery without a device number was accepted")
	}
}

func TestCleanStaleUblkNeedsUblkState(t *testing.T) {
	if err := (ublkFrontend{}).Release("x", "/dev/nbd0", map[string]string{}); err == nil {
		t.Error("an nbd device was taken for a ublk one")
	}
	if err := (ublkFrontend{}).Release("x", "/dev/ublkb0", map[string]string{ublkStateKey: "x"}); err == nil {
		t.Error("a malformed ublk-id line was accepted")
	}
}
