package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// luksdBind formats an image whose keyslot 0 opens with "zero" and has
// luksd bind a new keyslot to pin with cfg.
func luksdBind(w *workspace, name, pin, cfg string) string {
	w.t.Helper()
	img := w.image(name)
	testtool.CryptsetupFormat(w.t, img, w.key("zero", "zero"))
	w.luksd(nil, "clevis", "luks", "bind", "-y", "-k", w.path("zero"), "-d", img, pin, cfg).ok(w.t)
	return img
}

// tokenShape is a token's member names, and its JWE's, sorted.
func tokenShape(t *testing.T, js string) string {
	t.Helper()
	var tok map[string]json.RawMessage
	var jwe map[string]any
	if err := json.Unmarshal([]byte(js), &tok); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(tok["jwe"], &jwe); err != nil {
		t.Fatal(err)
	}
	return strings.Join(slices.Sorted(maps.Keys(tok)), ",") + " jwe:" + strings.Join(slices.Sorted(maps.Keys(jwe)), ",") + " " + string(tok["keyslots"])
}

// A volume luksd binds is one clevis 19 reads as its own: `clevis luks
// list` and `luksd clevis list` print the same, `clevis luks pass`
// recovers a passphrase that opens the new keyslot in cryptsetup, the
// keyslot is clevis's (PBKDF2, 1000 iterations) and the token has the
// shape of the one clevis writes.
func TestClevisBindLikeClevis(t *testing.T) {
	w := newWorkspace(t)
	a, b := testtool.Tang(t, "P-521"), testtool.Tang(t, "P-256")
	for _, c := range []struct{ name, pin, cfg string }{
		{"tang", "tang", `{"url":"` + a.URL + `"}`},
		{"sss", "sss", `{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`},
	} {
		img := luksdBind(w, c.name+".img", c.pin, c.cfg)
		ref := clevisBind(w, c.pin, c.cfg)
		want := testtool.Run(t, "clevis", "luks", "list", "-d", ref)
		if got := testtool.Run(t, "clevis", "luks", "list", "-d", img); got != want {
			t.Errorf("%s: clevis luks list of luksd's binding %q, of clevis's %q", c.name, got, want)
		}
		if got := w.luksd(nil, "clevis", "list", "-d", ref).ok(t).stdout; got != want {
			t.Errorf("%s: luksd clevis list %q, clevis luks list %q", c.name, got, want)
		}
		pass := testtool.Run(t, "clevis", "luks", "pass", "-d", img, "-s", "1")
		if len(pass) != 54 {
			t.Errorf("%s: passphrase of %d characters, pwmake gives 53-55 for 256 bits", c.name, len(pass))
		}
		w.cs([]byte(pass), "open", "--test-passphrase", "--key-slot", "1", img).ok(t)
		dump := w.cs(nil, "luksDump", img).ok(t).stdout
		if !strings.Contains(dump, "PBKDF:      pbkdf2") || !strings.Contains(dump, "Iterations: 1000\n") {
			t.Errorf("%s: keyslot 1 is not clevis's PBKDF2/1000:\n%s", c.name, dump)
		}
		got := tokenShape(t, w.cs(nil, "token", "export", "--token-id", "0", img).ok(t).stdout)
		if ws := tokenShape(t, w.cs(nil, "token", "export", "--token-id", "0", ref).ok(t).stdout); got != ws {
			t.Errorf("%s: token %s, clevis's %s", c.name, got, ws)
		}
		if r := w.luksd(nil, "open", "--test-passphrase", "-v", "--token-only", img).ok(t); firstLine(r.stdout) != "Key slot 1 unlocked." {
			t.Errorf("%s: luksd by token: %q", c.name, r.stdout)
		}
	}
}

// unbind removes the keyslot and the token, on a binding made by either
// tool; a slot without a clevis token is refused.
func TestClevisUnbind(t *testing.T) {
	w := newWorkspace(t)
	srv := testtool.Tang(t, "P-384")
	cfg := `{"url":"` + srv.URL + `"}`
	for _, img := range []string{luksdBind(w, "ours.img", "tang", cfg), clevisBind(w, "tang", cfg)} {
		w.luksd(nil, "clevis", "unbind", "-d", img, "-s", "0", "-f").expect(t, 1, "No clevis slot detected on device "+img+":0!")
		w.luksd(nil, "clevis", "unbind", "-d", img, "-s", "1", "-f").ok(t)
		dump := w.cs(nil, "luksDump", img).ok(t).stdout
		if strings.Contains(dump, "clevis") || strings.Contains(dump, "  1: luks2") {
			t.Errorf("after unbind:\n%s", dump)
		}
		if out := w.luksd(nil, "clevis", "list", "-d", img).ok(t).stdout; out != "" {
			t.Errorf("list after unbind: %q", out)
		}
	}
}

// Failures are one line with clevis's exit codes (2: usage, 1: the
// rest), and leave the header as it was.
func TestClevisBindFailures(t *testing.T) {
	w := newWorkspace(t)
	srv := testtool.Tang(t, "P-521")
	img := w.image("fail.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	w.key("wrong", "wrong")
	before := w.cs(nil, "luksDump", img).ok(t).stdout
	cfg := `{"url":"` + srv.URL + `"}`
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{2, "Did not specify a device!", []string{"bind", "tang", cfg}},
		{2, "Did not specify a pin!", []string{"bind", "-d", img}},
		{2, "'tpm3' is not a valid pin!", []string{"bind", "-d", img, "tpm3", "{}"}},
		{2, "Invalid option -x", []string{"bind", "-x", "-d", img, "tang", cfg}},
		{1, "Configuration is malformed", []string{"bind", "-d", img, "-k", w.path("zero"), "tang", "{"}},
		{1, "No key available with this passphrase", []string{"bind", "-y", "-d", img, "-k", w.path("wrong"), "tang", cfg}},
		{1, "Unable to save/update key slot", []string{"bind", "-y", "-d", img, "-s", "0", "-k", w.path("zero"), "tang", cfg}},
		{1, "Unable to perform encryption with PIN 'tang': Missing the required 'url' property", []string{"bind", "-y", "-d", img, "-k", w.path("zero"), "tang", "{}"}},
		{1, "Unable to perform encryption with PIN 'sss'", []string{"bind", "-y", "-d", img, "-k", w.path("zero"), "sss", `{"t":2,"pins":{"tang":[` + cfg + `]}}`}},
		// No terminal to ask whether to trust the server's keys.
		{1, "not trusted", []string{"bind", "-d", img, "-k", w.path("zero"), "tang", cfg}},
		{1, "Unable to fetch advertisement", []string{"bind", "-y", "-d", img, "-k", w.path("zero"), "tang", `{"url":"http://` + testtool.FreeLoopbackPort(t) + `"}`}},
		{1, "is a LUKS1 device", nil},
	} {
		args := c.args
		if args == nil {
			luks1 := w.image("luks1.img")
			testtool.CryptsetupFormat(t, luks1, w.path("zero"), "--type", "luks1")
			args = []string{"bind", "-y", "-d", luks1, "-k", w.path("zero"), "tang", cfg}
		}
		w.luksd(nil, append([]string{"clevis"}, args...)...).expect(t, c.code, c.want)
	}
	if after := w.cs(nil, "luksDump", img).ok(t).stdout; after != before {
		t.Errorf("a failed bind changed the header:\n%s\n---\n%s", before, after)
	}
}

// At a terminal, as with clevis: the existing passphrase without echo,
// the trust-on-first-use question naming the signing key, and unbind's
// question (declined: nothing changes) and remaining passphrase.
func TestClevisDialogsOnTTY(t *testing.T) {
	w := newWorkspace(t)
	srv := testtool.Tang(t, "P-256")
	img := w.image("tty.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	s := startOnTTY(t, "clevis", "luks", "bind", "-d", img, "tang", `{"url":"`+srv.URL+`"}`)
	s.answer("Enter existing LUKS password: ", 1, "zero")
	s.expect("The advertisement contains the following signing keys:", 1)
	s.answer("Do you wish to trust these keys? [ynYN] ", 1, "y")
	if code, screen := s.wait(); code != 0 || strings.Contains(screen, "zero") {
		t.Fatalf("bind: exit %d, screen %q", code, screen)
	}
	want := "1: tang '{\"url\":\"" + srv.URL + "\"}'\n"
	if got := testtool.Run(t, "clevis", "luks", "list", "-d", img); got != want {
		t.Fatalf("clevis luks list %q, want %q", got, want)
	}

	ask := "Do you wish to erase LUKS slot 1 on " + img + "? [ynYN] "
	s = startOnTTY(t, "clevis", "unbind", "-d", img, "-s", "1")
	s.answer(ask, 1, "n")
	if code, _ := s.wait(); code != 0 || testtool.Run(t, "clevis", "luks", "list", "-d", img) != want {
		t.Fatalf("declined unbind: exit %d, or the binding went", code)
	}
	s = startOnTTY(t, "clevis", "unbind", "-d", img, "-s", "1")
	s.answer(ask, 1, "y")
	s.answer("Enter any remaining passphrase: ", 1, "zero")
	if code, screen := s.wait(); code != 0 || testtool.Run(t, "clevis", "luks", "list", "-d", img) != "" {
		t.Fatalf("unbind: exit %d, screen %q", code, screen)
	}
}
