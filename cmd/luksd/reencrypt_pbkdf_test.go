package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// reencrypt's new keyslots, as cryptsetup 2.6.1 makes them: a copy of each
// old keyslot's PBKDF unless --pbkdf, --hash, --iter-time or
// --pbkdf-force-iterations asks for another (--pbkdf-memory and
// --pbkdf-parallel alone do not), the old area cipher (--keyslot-cipher is
// taken and ignored), the PBKDF's hash as AF hash and as the digests'
// hash. Each tool marks its own copy; the new keyslots and digests, exit
// code and stderr must match.

// newKeyslotSummary is img's keyslots from number first on and its
// digests, without salts and digest values, calibrated counts as
// "calibrated".
func newKeyslotSummary(w *workspace, img string, first int) string {
	w.t.Helper()
	var m struct {
		Keyslots map[string]map[string]any
		Digests  map[string]map[string]any
	}
	out := w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		w.t.Fatal(err)
	}
	calibrated := func(v any) any {
		if n, ok := v.(float64); ok && n != 1000 {
			return "calibrated"
		}
		return v
	}
	s := ""
	for id := first; id < 32; id++ {
		ks, ok := m.Keyslots[fmt.Sprint(id)]
		if !ok {
			continue
		}
		if kdf, ok := ks["kdf"].(map[string]any); ok {
			delete(kdf, "salt")
			if kdf["type"] == "pbkdf2" {
				kdf["iterations"] = calibrated(kdf["iterations"])
			}
		}
		if area, ok := ks["area"].(map[string]any); ok {
			delete(area, "offset")
		}
		j, _ := json.Marshal(ks)
		s += fmt.Sprintf("keyslot %d: %s\n", id, j)
	}
	for id := range 32 {
		d, ok := m.Digests[fmt.Sprint(id)]
		if !ok {
			continue
		}
		delete(d, "salt")
		delete(d, "digest")
		d["iterations"] = calibrated(d["iterations"])
		j, _ := json.Marshal(d)
		s += fmt.Sprintf("digest %d: %s\n", id, j)
	}
	return s
}

func TestReencryptPBKDFLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	base := w.image("base.img")
	// Keyslot 0: pbkdf2-sha512; keyslot 1: argon2i, an AF hash that is
	// not the PBKDF's, another area cipher.
	w.cs(nil, "luksFormat", "-q", base, key, "--hash", "sha512", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000").ok(t)
	w.cs(nil, append([]string{"luksAddKey", "-q", base, "-d", key, key, "--hash", "ripemd160",
		"--keyslot-cipher", "aes-cbc-essiv:sha256", "--keyslot-key-size", "256"}, cheapPBKDF("argon2i")...)...).ok(t)
	ld := testtool.Luksd(t)
	for _, c := range []struct {
		stdin []byte   // passphrases; nil: -d key
		args  []string // after reencrypt --init-only
	}{
		{nil, []string{"-S", "0"}},
		{nil, []string{"-S", "1"}},
		{[]byte("pw\npw\n"), nil},
		{nil, []string{"-S", "1", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1001"}},
		{nil, []string{"-S", "1", "--pbkdf", "PBKDF2", "--pbkdf-force-iterations", "1000", "--pbkdf-memory", "64"}},
		{nil, []string{"-S", "0", "--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32", "--pbkdf-parallel", "1"}},
		{nil, []string{"-S", "0", "--pbkdf", "argon2i", "--pbkdf-force-iterations", "5", "--pbkdf-memory", "48", "--pbkdf-parallel", "64"}},
		{nil, []string{"-S", "0", "--pbkdf", "pbkdf2", "--hash", "sha1", "--pbkdf-force-iterations", "1000"}},
		{nil, []string{"-S", "1", "--pbkdf", "pbkdf2", "--iter-time", "20", "--hash", "sha512"}},
		{[]byte("pw\npw\n"), []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--hash", "sha256"}},
		{nil, []string{"-S", "1", "--pbkdf-memory", "64", "--pbkdf-parallel", "1"}},
		{nil, []string{"-S", "0", "--keyslot-cipher", "aes-cbc-essiv:sha256", "--keyslot-key-size", "256"}},
		{nil, []string{"-S", "0", "--hash", "bogus"}},
		{nil, []string{"-S", "0", "--pbkdf", "argon2i", "--pbkdf-memory", "1", "--pbkdf-force-iterations", "4"}},
		{nil, []string{"-S", "0", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "999"}},
	} {
		var res [2]result
		var got [2]string
		for i, tool := range []string{w.cryptsetup, ld} {
			img := w.path(fmt.Sprintf("copy%d.img", i))
			copyFile(t, base, img)
			args := []string{"reencrypt", "--init-only", "--force-offline-reencrypt", "-q", img}
			if c.stdin == nil {
				args = append(args, "-d", key)
			}
			res[i] = runTool(t, c.stdin, tool, append(args, c.args...)...)
			got[i] = newKeyslotSummary(w, img, 2)
		}
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", c.args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("%v: cryptsetup made\n%sluksd made\n%s", c.args, got[0], got[1])
		}
	}
}

// A reencryption or decryption under way takes the PBKDF options and
// ignores them, as cryptsetup does.
func TestReencryptResumeTakesPBKDFOptions(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, img).ok(t)
	ld := testtool.Luksd(t)
	for _, tool := range []string{w.cryptsetup, ld} {
		copyImg := w.path("copy.img")
		copyFile(t, img, copyImg)
		runTool(t, nil, tool, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, copyImg,
			"--pbkdf", "pbkdf2", "--iter-time", "10", "--hash", "sha1", "--pbkdf-memory", "64", "--pbkdf-parallel", "1").ok(t)
	}
}
