package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Unlocking by token like cryptsetup 2.6.1: twin copies of one image,
// one per tool, the same command lines in one kernel session keyring;
// the same exit codes, the same -v lines and the same first message.

// firstLine is s's first line.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// tokenVolume formats an image (keyslot 0 "zero", keyslot 1 "one") and
// imports tokens.
func tokenVolume(w *workspace, tokens ...string) string {
	w.t.Helper()
	img := w.image("tokens.img")
	testtool.CryptsetupFormat(w.t, img, w.key("zero", "zero"))
	w.cs(nil, append([]string{"luksAddKey", "-q", "-d", w.path("zero"), img, w.key("one", "one")}, cheapPBKDF("pbkdf2")...)...).ok(w.t)
	for i, js := range tokens {
		f := w.key("token"+string(rune('0'+i)), js)
		w.cs(nil, "token", "import", "--json-file", f, img).ok(w.t)
	}
	return img
}

func TestKeyringTokensLikeCryptsetup(t *testing.T) {
	testtool.KeyringSession(t)
	w := newWorkspace(t)
	img := tokenVolume(w, keyringTokenJSON("0", "luksd-test:a"), keyringTokenJSON("1", "luksd-test:b"))
	w.key("new", "new")
	same := func(args ...string) {
		t.Helper()
		cs, ld, _, _ := w.twinRun(img, args...)
		if ld.code != cs.code || ld.stdout != cs.stdout || firstLine(ld.stderr) != firstLine(cs.stderr) {
			t.Errorf("%v:\n--- cryptsetup exit %d\n%s%s--- luksd exit %d\n%s%s", args, cs.code, cs.stdout, cs.stderr, ld.code, ld.stdout, ld.stderr)
		}
	}
	cases := [][]string{
		{"open", "--test-passphrase", "-v", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "--token-id", "1", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-id", "0", "-d", w.path("zero"), "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "--token-id", "0", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "--token-type", "luks2-keyring", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "--token-type", "clevis", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-id", "5", "IMG"},
		{"open", "--test-passphrase", "-v", "--token-only", "--token-id", "32", "IMG"},
		{"open", "--test-passphrase", "-v", "--disable-external-tokens", "--token-only", "IMG"},
		{"luksAddKey", "-v", "--token-id", "1", "IMG", w.path("new")},
		{"luksAddKey", "-v", "--token-only", "--token-id", "0", "IMG", w.path("new")},
		{"luksDump", "--dump-volume-key", "-q", "IMG"},
	}
	// No keys: every token fails.
	for _, args := range cases {
		same(args...)
	}
	// Token 0's key is wrong, token 1's opens keyslot 1.
	testtool.AddKernelKey(t, "user", "luksd-test:a", []byte("wrong"))
	testtool.AddKernelKey(t, "user", "luksd-test:b", []byte("one"))
	for _, args := range cases {
		same(args...)
	}
	// luksDump --dump-volume-key by token when asked (cryptsetup 2.6.1
	// never asks tokens there): the key the passphrase gives.
	want := volumeKey(t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", w.path("one"), img).ok(t).stdout)
	got := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "--token-only", img).ok(t).stdout)
	if got != want {
		t.Fatalf("volume key by token %s, by passphrase %s", got, want)
	}
}

// keyringTokenJSON is a luks2-keyring token for keyslot slot.
func keyringTokenJSON(slot, desc string) string {
	b, _ := json.Marshal(map[string]any{"type": "luks2-keyring", "keyslots": []string{slot}, "key_description": desc})
	return string(b)
}

// A volume bound by the real clevis (tang; sss over two tang servers)
// unlocks in luksd by its token alone, to the volume key cryptsetup
// finds with the passphrase.
func TestClevisTokensUnlock(t *testing.T) {
	w := newWorkspace(t)
	a, b := testtool.Tang(t, "P-521"), testtool.Tang(t, "P-384")
	for _, c := range []struct{ name, pin, cfg string }{
		{"tang", "tang", `{"url":"` + a.URL + `"}`},
		{"sss-t1", "sss", `{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`},
		{"sss-t2", "sss", `{"t":2,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`},
	} {
		img := clevisBind(w, c.pin, c.cfg)
		r := w.luksd(nil, "open", "--test-passphrase", "-v", "--token-only", img).ok(t)
		if firstLine(r.stdout) != "Key slot 1 unlocked." {
			t.Fatalf("%s: %q", c.name, r.stdout)
		}
		twin := w.path("twin.img")
		copyFile(t, img, twin)
		want := volumeKey(t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", w.path("zero"), twin).ok(t).stdout)
		got := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "--token-only", img).ok(t).stdout)
		if got != want {
			t.Fatalf("%s: volume key by token %s, by passphrase %s", c.name, got, want)
		}
	}
}

// tang down: one line, then the passphrase; with --token-only, exit 1.
// A tampered JWE is refused (exit 2 with --token-only).
func TestClevisTangDownAndTampered(t *testing.T) {
	w := newWorkspace(t)
	srv := testtool.Tang(t, "P-256")
	img := clevisBind(w, "tang", `{"url":"`+srv.URL+`"}`)

	tampered := w.path("tampered.img")
	copyFile(t, img, tampered)
	var tok map[string]any
	if err := json.Unmarshal([]byte(w.cs(nil, "token", "export", "--token-id", "0", tampered).ok(t).stdout), &tok); err != nil {
		t.Fatal(err)
	}
	jwe := tok["jwe"].(map[string]any)
	ct, err := base64.RawURLEncoding.DecodeString(jwe["ciphertext"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ct[0] ^= 1
	jwe["ciphertext"] = base64.RawURLEncoding.EncodeToString(ct)
	js, _ := json.Marshal(tok)
	w.cs(nil, "token", "import", "--token-id", "0", "--token-replace", "--json-file", w.key("tampered.json", string(js)), tampered).ok(t)
	r := w.luksd(nil, "open", "--test-passphrase", "--token-only", tampered)
	r.expect(t, 2, "Token 0 (clevis): JWE authentication failed")

	srv.Stop()
	r = w.luksd(nil, "open", "--test-passphrase", "-d", w.path("zero"), img)
	r.expect(t, 0, "")
	if !strings.HasPrefix(r.stderr, "Token 0 (clevis): tang server "+srv.URL+": ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("tang down: stderr %q, want one line naming the server", r.stderr)
	}
	w.luksd(nil, "open", "--test-passphrase", "--token-only", img).expect(t, 1, "tang server "+srv.URL)
}

// clevisBind formats an image whose keyslot 0 opens with "zero" and has
// the real clevis bind keyslot 1 to pin with cfg.
func clevisBind(w *workspace, pin, cfg string) string {
	w.t.Helper()
	img := w.image("clevis-" + pin + ".img")
	testtool.CryptsetupFormat(w.t, img, w.key("zero", "zero"))
	testtool.Run(w.t, "clevis", "luks", "bind", "-y", "-k", w.path("zero"), "-d", img, pin, cfg)
	return img
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// LUKS1 has no tokens: --token-only and a token id fail without a word,
// and open without them goes on to the passphrase.
func TestTokenOptionsOnLUKS1(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("luks1.img")
	testtool.CryptsetupFormat(w.t, img, w.key("zero", "zero"), "--type", "luks1")
	for _, args := range [][]string{
		{"open", "--test-passphrase", "-v", "--token-only", "IMG"},
		{"luksAddKey", "-v", "--token-id", "0", "IMG", w.key("new", "new")},
		{"open", "--test-passphrase", "-v", "-d", w.path("zero"), "IMG"},
	} {
		cs, ld, _, _ := w.twinRun(img, args...)
		w.sameAs(strings.Join(args, " "), cs, ld)
	}
}
