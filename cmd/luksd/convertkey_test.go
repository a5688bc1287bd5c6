package main

import (
	"encoding/json"
	"regexp"
	"testing"
)

// luksConvertKey like cryptsetup 2.6.1's, on twin images: exit codes,
// messages, -v output, and the keyslots (all but their salts), digests'
// bindings and tokens as cryptsetup dumps them afterwards.

var jsonSalt = regexp.MustCompile(`"(salt|digest)":"[^"]*"`)

// saltlessMetadata returns img's keyslots, digests and tokens as stored,
// salts and digest values blanked (they differ between twins).
func saltlessMetadata(w *workspace, img string) string {
	w.t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout), &m); err != nil {
		w.t.Fatal(err)
	}
	return jsonSalt.ReplaceAllString(string(m["keyslots"])+string(m["digests"])+string(m["tokens"]), `"$1":""`)
}

func TestConvertKeyLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, wrong := w.key("key", "pw"), w.key("wrong", "nope")
	tw := newTwin(w, key, cheapPBKDF("pbkdf2")...)
	for _, img := range []string{tw.cs, tw.mine} {
		w.cs(nil, append([]string{"luksAddKey", "-q", "-d", key, "-S", "5", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
		w.cs(nil, "config", "--priority", "prefer", "-S", "0", img).ok(t)
		w.cs(nil, "token", "add", "--key-description", "d", img).ok(t)
	}
	argon := []string{"--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32", "--pbkdf-parallel", "1"}
	run := func(args ...string) {
		t.Helper()
		tw.run("", args...)
		if a, b := saltlessMetadata(w, tw.cs), saltlessMetadata(w, tw.mine); a != b {
			t.Fatalf("%v: metadata differs:\n--- cryptsetup\n%s\n--- luksd\n%s", args, a, b)
		}
		for _, img := range []string{tw.cs, tw.mine} {
			if !w.opens(img, key) {
				t.Fatalf("%v: the passphrase no longer opens %s", args, img)
			}
		}
	}
	// In place, the keyslot keeps its area and priority.
	run(append([]string{"-v", "luksConvertKey", "-S", "0", "-d", key, "IMG"}, argon...)...)
	run("-v", "luksConvertKey", "-S", "5", "--pbkdf", "pbkdf2", "-h", "sha512", "--pbkdf-force-iterations", "1000", "-d", key, "IMG")
	run("luksConvertKey", "-d", key, "-S5", "IMG", "--pbkdf=argon2i", "--pbkdf-force-iterations=4", "--pbkdf-memory=64", "--pbkdf-parallel=2")
	// Without -S, the keyslot the passphrase opens is made anew.
	run(append([]string{"-v", "luksConvertKey", "-d", key, "IMG"}, cheapPBKDF("pbkdf2")...)...)
	// Refusals.
	run(append([]string{"-v", "luksConvertKey", "-S", "3", "-d", key, "IMG"}, argon...)...)
	run(append([]string{"-v", "luksConvertKey", "-S", "40", "-d", key, "IMG"}, argon...)...)
	run(append([]string{"-v", "luksConvertKey", "-S", "0", "-d", wrong, "IMG"}, argon...)...)
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "--pbkdf", "scrypt", "IMG")
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "999", "IMG")
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "-i", "10", "--pbkdf-force-iterations", "1000", "IMG")
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "--label", "x", "IMG")
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "--unbound", "IMG")
	run("-v", "luksConvertKey")
	run("-v", "luksConvertKey", "-S", "0", "-d", key, "IMG.missing")

	luks1 := newTwin(w, key, "--type", "luks1", "--pbkdf-force-iterations", "1000")
	luks1.run("", "-v", "luksConvertKey", "-S", "0", "-d", key, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "IMG")
}
