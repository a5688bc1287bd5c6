package main

import (
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestInteropTestPassphraseLikeCryptsetup runs `open --test-passphrase`
// through both tools with the same arguments and input.
func TestInteropTestPassphraseLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key, bad := w.image("vol.img"), w.key("key", "pw"), w.key("bad", "nope")
	w.luksd(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("argon2id")...)...).ok(t)
	data, hdr := w.image("data.img"), w.path("hdr.img")
	w.cs(nil, append([]string{"luksFormat", "-q", "--header", hdr, data, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	plain := testtool.ImageAt(t, w.dir, "plain.img", 1<<20)
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"open", "--test-passphrase", "-d", key, img}},
		{"", []string{"open", "--test-passphrase", "-d", bad, img}},
		{"", []string{"open", "--test-passphrase", "-v", "-d", key, img}},
		{"", []string{"--test-passphrase", "-d", key, "open", img}},
		{"", []string{"open", img, "--test-passphrase", "--key-file", key}},
		{"pw\n", []string{"open", "--test-passphrase", img}},
		{"nope\n", []string{"open", "--test-passphrase", img}},
		{"pw", []string{"open", "--test-passphrase", "-d", "-", img}},
		{"", []string{"open", "--test-passphrase", "-d", key, "-S", "0", img}},
		{"", []string{"open", "--test-passphrase", "-d", key, "-S", "3", img}},
		{"", []string{"open", "--test-passphrase", "-d", key, "--header", hdr, data}},
		{"", []string{"open", "--test-passphrase", "-d", key, data}},
		{"", []string{"open", "--test-passphrase", "-d", key, w.path("missing")}},
		{"", []string{"open", "--test-passphrase", "-d", key, plain}},
		{"", []string{"open", "--test-passphrase", "-d", w.path("missing"), img}},
	} {
		want := w.cs([]byte(c.stdin), c.args...)
		got := w.luksd([]byte(c.stdin), c.args...)
		if got.code != want.code || got.stdout != want.stdout && !strings.Contains(want.stdout, "token") ||
			want.stderr != "" && !strings.HasSuffix(lastLine(want.stderr), lastLine(got.stderr)) {
			t.Errorf("%v:\n  luksd      exit %d %q %q\n  cryptsetup exit %d %q %q", c.args, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
		}
	}
}
