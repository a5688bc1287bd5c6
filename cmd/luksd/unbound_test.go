package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestUnboundKeyLikeCryptsetup: luksDump --unbound -S N and open
// --test-passphrase --unbound on twin images (the same volume key, UUID
// and unbound key), run through cryptsetup and luksd: the same exit codes,
// stdout (the unbound key's dump, -v lines) and error lines.
func TestUnboundKeyLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	k0, k1, wrong := w.key("k0", "bound pass"), w.key("k1", "unbound pass"), w.key("wrong", "wrong pass")
	vk := w.key("vk", strings.Repeat("v", 64))
	uk := w.key("uk", "unbound key of 32 bytes, exactly")
	const uuid = "0b1e2d3c-4a5b-4c6d-8e7f-8091a2b3c4d5"
	tw := newTwin(w, k0, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--uuid", uuid, "--volume-key-file", vk)
	for _, img := range []string{tw.cs, tw.mine} {
		w.cs(nil, "luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--unbound", "-s", "256",
			"--volume-key-file", uk, "-S", "1", img, k1).ok(t)
	}

	// The dump of the unbound key, with and without -v; -q changes nothing
	// off a terminal; --dump-json-metadata is outranked.
	out := tw.run("", "luksDump", "--unbound", "-S", "1", "-d", k1, "IMG").stdout
	if !strings.Contains(out, "Key bits:\t256\n") || !strings.Contains(out, "Unbound Key:\t75 6e 62 6f") {
		t.Fatalf("the dump does not show the unbound key:\n%s", out)
	}
	tw.run("", "-v", "luksDump", "--unbound", "-S", "1", "-d", k1, "IMG")
	tw.run("", "luksDump", "--unbound", "-S", "1", "-q", "--dump-json-metadata", "-d", k1, "IMG")
	tw.run("k1 is not this\n", "luksDump", "--unbound", "-S", "1", "IMG")
	// --volume-key-file takes the key instead of stdout.
	tw.run("", "luksDump", "--unbound", "-S", "1", "-d", k1, "--volume-key-file", "IMG.key", "IMG")
	a, errA := os.ReadFile(tw.cs + ".key")
	b, errB := os.ReadFile(tw.mine + ".key")
	want, _ := os.ReadFile(uk)
	if errA != nil || errB != nil || !bytes.Equal(a, want) || !bytes.Equal(b, want) {
		t.Fatalf("key files: cryptsetup %x (%v), luksd %x (%v), want %x", a, errA, b, errB, want)
	}
	tw.run("", "luksDump", "--unbound", "-S", "1", "-d", k1, "--volume-key-file", "IMG.key", "IMG")

	// Refusals: no slot, a bound or empty slot, the wrong passphrase.
	tw.run("", "-v", "luksDump", "--unbound", "-d", k1, "IMG")
	tw.run("", "-v", "luksDump", "--unbound", "-S", "0", "-d", k0, "IMG")
	tw.run("", "luksDump", "--unbound", "-S", "2", "-d", k1, "IMG")
	tw.run("", "luksDump", "--unbound", "-S", "40", "-d", k1, "IMG")
	tw.run("", "-v", "luksDump", "--unbound", "-S", "1", "-d", wrong, "IMG")
	tw.run("", "luksDump", "--unbound", "-S", "1", "-d", k0, "IMG")
	// --dump-volume-key outranks --unbound: the unbound passphrase opens
	// no bound keyslot, the bound one dumps the volume key.
	tw.run("", "luksDump", "--unbound", "-S", "1", "--dump-volume-key", "-d", k1, "IMG")
	out = tw.run("", "luksDump", "--unbound", "-S", "1", "--dump-volume-key", "-q", "-d", k0, "IMG").stdout
	if !strings.Contains(out, "MK bits:       \t512\n") || !strings.Contains(out, "MK dump:\t76 76 76") {
		t.Fatalf("--dump-volume-key --unbound does not dump the volume key:\n%s", out)
	}

	// open --test-passphrase --unbound: unbound keyslots open too.
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-d", k1, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-d", k0, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-S", "1", "-d", k1, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-S", "0", "-d", k1, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-d", wrong, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "--type", "luks1", "-d", k1, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "-d", k1, "IMG")
	tw.run("", "-v", "open", "--unbound", "-d", k1, "IMG", "name")
	tw.run("", "-v", "open", "--unbound", "--type", "plain", "-d", k1, "IMG", "name")

	// On a terminal luksDump --unbound asks first; declined, exit 2 and
	// no passphrase prompt.
	screens := map[string]string{}
	for prog, img := range map[string]string{w.cryptsetup: tw.cs, "": tw.mine} {
		args := []string{"luksDump", "--unbound", "-S", "1", img}
		var s *ttySession
		if prog == "" {
			s = startOnTTY(t, args...)
		} else {
			s = startProgOnTTY(t, prog, args...)
		}
		s.answer(sureSuffix, 1, "no")
		code, screen := s.wait()
		if code != exitPermission || strings.Contains(screen, "Enter passphrase") {
			t.Errorf("%q declined: exit %d:\n%s", prog, code, screen)
		}
		screens[prog] = strings.ReplaceAll(screen, img, "IMG")
	}
	if screens[w.cryptsetup] != screens[""] {
		t.Errorf("the terminals differ:\n--- cryptsetup\n%s\n--- luksd\n%s", screens[w.cryptsetup], screens[""])
	}
}

// TestUnboundOnLUKS1LikeCryptsetup: LUKS1 has no unbound keyslots.
func TestUnboundOnLUKS1LikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	k0 := w.key("k0", "luks1 pass")
	tw := newTwin(w, k0, "--type", "luks1", "--pbkdf-force-iterations", "1000")
	tw.run("", "-v", "luksDump", "--unbound", "-S", "0", "-d", k0, "IMG")
	tw.run("", "luksDump", "--unbound", "-S", "3", "-d", k0, "IMG")
	tw.run("", "-v", "open", "--test-passphrase", "--unbound", "-d", k0, "IMG")
}
