package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// restoreFixture holds cryptsetup-made volumes and header backups, LUKS1
// and LUKS2, alike and different in UUID, key size, data offset and
// keyslots area size.
type restoreFixture struct {
	w       *workspace
	devices map[string]string // name -> image
	backups map[string]string // name -> backup file
}

func newRestoreFixture(t *testing.T) *restoreFixture {
	w := newWorkspace(t)
	key := w.key("key", "restore pass")
	pb := []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	f := &restoreFixture{w: w, devices: map[string]string{}, backups: map[string]string{}}
	for name, args := range map[string][]string{
		"luks1":         {"--type", "luks1"},
		"luks1-other":   {"--type", "luks1"},
		"luks1-256":     {"--type", "luks1", "-s", "256"},
		"luks2":         {"--type", "luks2"},
		"luks2-other":   {"--type", "luks2"},
		"luks2-areas":   {"--type", "luks2", "--offset", "32768", "--luks2-keyslots-size", "8388608"},
		"luks2-offset":  {"--type", "luks2", "--offset", "36864"},
		"luks2-noslots": nil, // not formatted: zeros
	} {
		img := w.image(name + ".img")
		f.devices[name] = img
		if args == nil {
			continue
		}
		w.cs(nil, append(append(append([]string{"luksFormat", "-q"}, args...), pb...), img, key)...).ok(t)
		bak := w.path(name + ".hdr")
		w.cs(nil, "luksHeaderBackup", img, "--header-backup-file", bak).ok(t)
		f.backups[name] = bak
	}
	return f
}

// copies gives each tool its own copy of device.
func (f *restoreFixture) copies(device string) (cs, mine string) {
	t := f.w.t
	t.Helper()
	b, err := os.ReadFile(f.devices[device])
	if err != nil {
		t.Fatal(err)
	}
	// Names of the same length: cryptsetup cuts some questions short.
	cs, mine = f.w.path("c-"+device+".img"), f.w.path("l-"+device+".img")
	for _, p := range []string{cs, mine} {
		os.Remove(p)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cs, mine
}

// TestHeaderRestoreLikeCryptsetup: luksHeaderRestore -q -v of every backup
// onto every kind of device, through cryptsetup and luksd on copies: the
// same exit code, stdout, stderr and resulting image, byte for byte. A
// LUKS1 backup replaces a LUKS2 header (cryptsetup says "Unsupported LUKS
// version 2." and goes on); a header of the backup's version with another
// data offset, key size (LUKS1) or keyslots area size (LUKS2) is kept.
func TestHeaderRestoreLikeCryptsetup(t *testing.T) {
	f := newRestoreFixture(t)
	w := f.w
	for _, c := range []struct{ backup, device string }{
		{"luks1", "luks1"}, {"luks1", "luks1-other"}, {"luks1", "luks1-256"}, {"luks1", "luks2"}, {"luks1", "luks2-noslots"},
		{"luks1-256", "luks2-offset"},
		{"luks2", "luks2"}, {"luks2", "luks2-other"}, {"luks2", "luks2-areas"}, {"luks2", "luks2-offset"},
		{"luks2", "luks1"}, {"luks2", "luks2-noslots"}, {"luks2-areas", "luks2"}, {"luks2-offset", "luks2"},
	} {
		cs, mine := f.copies(c.device)
		args := func(img string) []string {
			return []string{"-q", "-v", "luksHeaderRestore", img, "--header-backup-file", f.backups[c.backup]}
		}
		want, got := w.cs(nil, args(cs)...), w.luksd(nil, args(mine)...)
		for _, r := range []*result{&want, &got} {
			r.stdout = strings.NewReplacer(cs, "IMG", mine, "IMG").Replace(r.stdout)
			r.stderr = strings.NewReplacer(cs, "IMG", mine, "IMG").Replace(r.stderr)
		}
		if got.code != want.code || got.stdout != want.stdout || got.stderr != want.stderr {
			t.Errorf("%s backup onto %s: luksd exit %d stdout %q stderr %q; cryptsetup exit %d stdout %q stderr %q",
				c.backup, c.device, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			continue
		}
		a, _ := os.ReadFile(cs)
		b, _ := os.ReadFile(mine)
		if !bytes.Equal(a, b) {
			t.Errorf("%s backup onto %s: the images differ after the restore", c.backup, c.device)
		}
	}
}

// TestHeaderRestoreDialogLikeCryptsetup: on a terminal, both tools show
// the same warning (LUKS1's "LUKS header", LUKS2's "LUKS2 header", the UUID
// warning) and restore on YES; a declined restore changes nothing (exit 1).
func TestHeaderRestoreDialogLikeCryptsetup(t *testing.T) {
	f := newRestoreFixture(t)
	cryptsetup := f.w.cryptsetup
	for _, c := range []struct {
		backup, device, answer string
		code                   int
	}{
		{"luks1", "luks1-other", "YES", 0},
		{"luks1", "luks2", "YES", 0},
		{"luks1", "luks2-noslots", "YES", 0},
		{"luks2", "luks1", "YES", 0},
		{"luks2", "luks2-other", "YES", 0},
		{"luks1", "luks2", "no", 1},
		{"luks2", "luks2", "no", 1},
	} {
		cs, mine := f.copies(c.device)
		before, _ := os.ReadFile(cs)
		screens := map[string]string{}
		for prog, img := range map[string]string{cryptsetup: cs, "": mine} {
			args := []string{"-v", "luksHeaderRestore", img, "--header-backup-file", f.backups[c.backup]}
			var s *ttySession
			if prog == "" {
				s = startOnTTY(t, args...)
			} else {
				s = startProgOnTTY(t, prog, args...)
			}
			s.answer(sureSuffix, 1, c.answer)
			code, screen := s.wait()
			if code != c.code {
				t.Errorf("%s backup onto %s (%s) answered %s: exit %d, want %d:\n%s", c.backup, c.device, prog, c.answer, code, c.code, screen)
			}
			screens[prog] = strings.ReplaceAll(screen, img, "IMG")
		}
		if screens[cryptsetup] != screens[""] {
			t.Errorf("%s backup onto %s: the terminals differ:\n--- cryptsetup\n%s\n--- luksd\n%s", c.backup, c.device, screens[cryptsetup], screens[""])
		}
		a, _ := os.ReadFile(cs)
		b, _ := os.ReadFile(mine)
		if !bytes.Equal(a, b) {
			t.Errorf("%s backup onto %s: the images differ", c.backup, c.device)
		}
		if c.code != 0 && !bytes.Equal(a, before) {
			t.Errorf("%s backup onto %s: a declined restore changed the image", c.backup, c.device)
		}
	}
}
