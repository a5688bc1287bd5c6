package frontend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// stubFrontend is a frontend whose availability the test decides; the
// one named "ublk" declares ublk's control node (control).
type stubFrontend struct {
	name string
	err  error
}

// control is the ublk control node the stubs declare, set by withFrontends.
var control string

func (s stubFrontend) Name() string     { return s.name }
func (s stubFrontend) Available() error { return s.err }
func (s stubFrontend) Caps() Caps {
	if s.name == "ublk" {
		return Caps{Node: control, Module: "ublk_drv"}
	}
	return Caps{}
}
func (s stubFrontend) Attach(blockdev.Device, Options) (Attachment, error) {
	return nil, errors.New("stub")
}
func (s stubFrontend) Release(string, string, map[string]string) error { return nil }

// withFrontends swaps the registry and the ublk control node for a test.
// It returns the modules Pick asked to load.
func withFrontends(t *testing.T, fs map[string]Frontend, ctl string) *[]string {
	t.Helper()
	oldF, oldC, oldL := registered, control, loadModule
	var loaded []string
	registered, control = fs, ctl
	loadModule = func(m string) error { loaded = append(loaded, m); return errors.New("no modules here") }
	t.Cleanup(func() { registered, control, loadModule = oldF, oldC, oldL })
	return &loaded
}

func TestPickFrontend(t *testing.T) {
	dir := t.TempDir()
	control := filepath.Join(dir, "ublk-control")
	missing := filepath.Join(dir, "none")
	os.WriteFile(control, nil, 0o600)
	down := errors.New("module missing")
	cases := []struct {
		name    string
		fs      map[string]Frontend
		control string
		ask     string
		want    string // frontend name, or "error: substring"
	}{
		{"auto prefers ublk", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", nil}}, control, "auto", "ublk"},
		{"empty means auto", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", nil}}, control, "", "ublk"},
		{"auto without ublk-control", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", nil}}, missing, "auto", "nbd"},
		{"auto with ublk unusable", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", down}}, control, "auto", "nbd"},
		{"auto with nothing usable", map[string]Frontend{"nbd": stubFrontend{"nbd", down}, "ublk": stubFrontend{"ublk", down}}, missing, "auto", "error: no usable frontend (nbd: module missing; ublk: module missing)"},
		{"explicit nbd", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", nil}}, control, "nbd", "nbd"},
		{"explicit unusable", map[string]Frontend{"nbd": stubFrontend{"nbd", down}}, missing, "nbd", "error: frontend nbd is not usable: module missing"},
		{"unknown", map[string]Frontend{"nbd": stubFrontend{"nbd", nil}, "ublk": stubFrontend{"ublk", nil}}, missing, "loop", `error: unknown frontend "loop" (have: nbd, ublk)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loaded := withFrontends(t, c.fs, c.control)
			f, err := Pick(c.ask)
			_, ublkOK := c.fs["ublk"]
			wantLoad := (c.ask == "auto" || c.ask == "") && c.control == missing && ublkOK
			if got := len(*loaded) == 1 && (*loaded)[0] == "ublk_drv"; got != wantLoad {
				t.Errorf("modules loaded %v; want ublk_drv loaded: %v", *loaded, wantLoad)
			}
			if want, ok := strings.CutPrefix(c.want, "error: "); ok {
				if err == nil || err.Error() != want {
					t.Fatalf("Pick(%q) = %v, %v; want error %q", c.ask, f, err, want)
				}
				return
			}
			if err != nil || f.Name() != c.want {
				t.Fatalf("Pick(%q) = %v, %v; want %s", c.ask, f, err, c.want)
			}
		})
	}
}

func TestNBDFrontendRegistered(t *testing.T) {
	f, ok := Lookup("nbd")
	if !ok || f.Name() != "nbd" {
		t.Fatal(`no "nbd" frontend registered`)
	}
	// Recovery needs to know which device to take over.
	if _, err := f.Attach(devtest.NewMem(4096), Options{Name: "x", Recover: true}); err == nil || !strings.Contains(err.Error(), "--nbd-device") {
		t.Fatalf("nbd recover without a device: %v", err)
	}
	if _, err := f.Attach(devtest.NewMem(4096), Options{Name: "x", Device: "/dev/sda"}); err == nil {
		t.Fatal("nbd attach accepted /dev/sda")
	}
}
