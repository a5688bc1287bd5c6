package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The token action like cryptsetup 2.6.1's: the same command lines on
// twin images must give the same exit codes, stdout, messages, tokens
// (byte for byte in the metadata) and number of header writes.

// tokensAndEpoch returns img's "tokens" object exactly as stored, and the
// Epoch cryptsetup's luksDump shows.
func tokensAndEpoch(w *workspace, img string) (string, string) {
	w.t.Helper()
	js := w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		w.t.Fatalf("metadata of %s: %v", img, err)
	}
	epoch := regexp.MustCompile(`(?m)^Epoch:.*$`).FindString(w.cs(nil, "luksDump", img).ok(w.t).stdout)
	return string(m["tokens"]), epoch
}

// sameTokens checks that both twins hold the same tokens, in the same
// order, after the same number of header writes, and that cryptsetup
// dumps and exports them alike.
func (tw *twin) sameTokens(args []string) {
	t := tw.w.t
	t.Helper()
	a, ea := tokensAndEpoch(tw.w, tw.cs)
	b, eb := tokensAndEpoch(tw.w, tw.mine)
	if a != b || ea != eb {
		t.Fatalf("%v: tokens differ:\n--- cryptsetup (%s)\n%s\n--- luksd (%s)\n%s", args, ea, a, eb, b)
	}
	section := regexp.MustCompile(`(?s)Tokens:.*Digests:`)
	da := section.FindString(tw.w.cs(nil, "luksDump", tw.cs).ok(t).stdout)
	db := section.FindString(tw.w.cs(nil, "luksDump", tw.mine).ok(t).stdout)
	if da != db {
		t.Fatalf("%v: luksDump's tokens differ:\n--- cryptsetup\n%s\n--- luksd\n%s", args, da, db)
	}
	// luksd dumps cryptsetup's tokens as cryptsetup does.
	if dm := section.FindString(tw.w.luksd(nil, "luksDump", tw.cs).ok(t).stdout); dm != da {
		t.Fatalf("%v: luksd dumps cryptsetup's tokens otherwise:\n--- cryptsetup\n%s\n--- luksd\n%s", args, da, dm)
	}
}

// badTokenJSON are token files both tools refuse to import.
var badTokenJSON = map[string]string{
	"inactive":    `{"type":"foo","keyslots":["3"]}`,
	"numeric":     `{"type":"foo","keyslots":[1]}`,
	"leading0":    `{"type":"foo","keyslots":["05"]}`,
	"letters":     `{"type":"foo","keyslots":["a"]}`,
	"nokeyslots":  `{"type":"foo"}`,
	"notype":      `{"keyslots":[]}`,
	"typenumber":  `{"type":5,"keyslots":[]}`,
	"keyringdesc": `{"type":"luks2-keyring","keyslots":[]}`,
	"descnumber":  `{"type":"luks2-keyring","keyslots":[],"key_description":5}`,
	"builtin":     `{"type":"luks2-foo","keyslots":[]}`,
	"array":       `[{"type":"foo","keyslots":[]}]`,
	"truncated":   `{"type":"foo","keyslots":[]`,
	"empty":       ``,
}

func TestTokenLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	tw := newTwin(w, key, cheapPBKDF("pbkdf2")...)
	for _, img := range []string{tw.cs, tw.mine} {
		w.cs(nil, append([]string{"luksAddKey", "-q", "-d", key, "-S", "5", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
		w.cs(nil, append([]string{"luksAddKey", "-q", "-d", key, "-S", "2", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	}
	jsonFile := func(name, body string) string {
		p := w.path(name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := jsonFile("good.json", `{"type":"foo","keyslots":["5"],"x":{"a":[1,2.50,"\u00e9\/"]},"n":-0,"big":99999999999999999999,"e":1E3,"d":1,"d":2,"t":true,"z":null}`)
	plain := jsonFile("plain.json", `{ "type" : "bar", "keyslots" : [ ] } trailing`)
	keyring := jsonFile("keyring.json", `{"type":"luks2-keyring","keyslots":["0","2"],"key_description":"k"}`)
	huge := jsonFile("huge.json", `{"type":"big","keyslots":[],"pad":"`+strings.Repeat("x", 14000)+`"}`)
	run := func(stdin string, args ...string) {
		t.Helper()
		tw.run(stdin, args...)
		tw.sameTokens(args)
	}
	// Adding keyring tokens.
	run("", "-v", "token", "add", "--key-description", "foo", "IMG")
	run("", "-v", "token", "add", "--key-description", "bar", "-S", "5", "--token-id", "7", "IMG")
	run("", "-v", "token", "add", "--key-description", "baz", "-S", "3", "IMG")
	run("", "-v", "token", "add", "--key-description", "baz", "--token-id", "7", "IMG")
	run("", "-v", "token", "add", "--key-description", "baz", "--token-id", "32", "IMG")
	run("", "-v", "token", "add", "--key-description", "baz", "--token-id", "-2", "IMG")
	run("", "-v", "token", "add", "--key-description", "baz", "-S", "40", "IMG")
	run("", "-v", "token", "add", "--key-description", "u", "--unbound", "IMG")
	run("", "-v", "token", "add", "--key-description", "u", "--unbound", "-S", "0", "IMG")
	run("", "-v", "token", "add", "--key-description", "q \"/\\", "--token-replace", "--token-id", "7", "IMG")
	run("", "-v", "token", "add", "--key-description", `a\/b\u00e9`, "IMG")
	run("", "-v", "token", "add", "IMG")
	run("", "token", "--key-description", "x", "IMG", "add", "--token-id=31")
	// Importing.
	run("", "-v", "token", "import", "--json-file", good, "IMG")
	run("", "-v", "token", "import", "--json-file", plain, "-S", "2", "IMG")
	run("", "-v", "token", "import", "--json-file", keyring, "--token-id", "20", "IMG")
	run("", "-v", "token", "import", "--json-file", keyring, "--token-id", "20", "IMG")
	run("", "-v", "token", "import", "--json-file", plain, "--token-id", "20", "--token-replace", "-S", "0", "IMG")
	run("", "-v", "token", "import", "--json-file", plain, "-S", "6", "IMG")
	run("", "-v", "token", "import", "--json-file", plain, "-S", "33", "IMG")
	run("", "-v", "token", "import", "--json-file", plain, "--token-id", "32", "IMG")
	run("", "-v", "token", "import", "--json-file", huge, "IMG")
	run("", "-v", "token", "import", "--json-file", w.path("missing.json"), "IMG")
	run("", "-v", "token", "import", "--unbound", "--json-file", plain, "IMG")
	run(`{"type":"stdin","keyslots":["0"]}`, "-v", "token", "import", "IMG")
	run(`{"type":"dash","keyslots":[]}`, "-v", "token", "import", "--json-file", "-", "IMG")
	for name, body := range badTokenJSON {
		run("", "-v", "token", "import", "--json-file", jsonFile(name+".json", body), "IMG")
	}
	// Exporting: standard output, a file, refusals.
	for _, id := range []string{"0", "1", "2", "3", "7", "20", "31"} {
		run("", "token", "export", "--token-id", id, "IMG")
	}
	run("", "-v", "token", "export", "--token-id", "0", "--json-file", "-", "IMG")
	run("", "-v", "token", "export", "--token-id", "4", "IMG")
	run("", "-v", "token", "export", "--token-id", "32", "IMG")
	run("", "-v", "token", "export", "IMG")
	run("", "-v", "token", "export", "--token-id", "0", "--json-file", w.path("nodir/x.json"), "IMG")
	run("", "-v", "token", "export", "--token-id", "1", "--json-file", "IMG.json", "IMG")
	a, errA := os.ReadFile(tw.cs + ".json")
	b, errB := os.ReadFile(tw.mine + ".json")
	if errA != nil || errB != nil || !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatalf("exported files differ: cryptsetup %q (%v), luksd %q (%v)", a, errA, b, errB)
	}
	if fi, err := os.Stat(tw.mine + ".json"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exported file mode: %v %v", fi.Mode(), err)
	}
	// Unassigning and removing.
	run("", "-v", "token", "unassign", "--token-id", "0", "-S", "5", "IMG")
	run("", "-v", "token", "unassign", "--token-id", "0", "-S", "5", "IMG")
	run("", "-v", "token", "unassign", "--token-id", "9", "-S", "0", "IMG")
	run("", "-v", "token", "unassign", "--token-id", "40", "-S", "0", "IMG")
	run("", "-v", "token", "unassign", "--token-id", "0", "-S", "40", "IMG")
	run("", "-v", "token", "unassign", "--token-id", "0", "IMG")
	run("", "-v", "token", "remove", "--token-id", "7", "IMG")
	run("", "-v", "token", "remove", "--token-id", "7", "IMG")
	run("", "-v", "token", "remove", "--token-id", "40", "IMG")
	run("", "-v", "token", "remove", "--token-id", "-2", "IMG")
	run("", "-v", "token", "remove", "IMG")
	// Killing a keyslot drops it from the tokens too.
	run("", "-q", "luksKillSlot", "IMG", "2")
	// Bad actions and lines.
	run("", "-v", "token", "frob", "IMG")
	run("", "-v", "token", "IMG")
	run("", "-v", "token", "remove", "--token-id", "1", "--label", "x", "IMG")
	run("", "-v", "token", "remove", "--token-id", "1", "--pbkdf", "pbkdf2", "IMG")
	run("", "-v", "token", "remove", "--token-id", "1", "-S", "0", "--token-type", "x", "-d", key, "IMG")
	changeKeyKeepsTokens(t, w, tw, key)
}

// Changing a passphrase keeps the keyslot in its tokens. (luksd writes
// the header once more than cryptsetup here, to rewrite the keyslot
// crash-safely, so only the tokens are compared.)
func changeKeyKeepsTokens(t *testing.T, w *workspace, tw *twin, key string) {
	t.Helper()
	for _, args := range [][]string{
		{"-q", "luksChangeKey", "-d", key, "-S", "0", "IMG", key},
		{"-q", "luksChangeKey", "-d", key, "IMG", key},
	} {
		args = append(args, cheapPBKDF("pbkdf2")...)
		tw.run("", args...)
		a, _ := tokensAndEpoch(w, tw.cs)
		b, _ := tokensAndEpoch(w, tw.mine)
		if a != b || !strings.Contains(b, `"0"`) {
			t.Fatalf("%v: tokens differ or lost keyslot 0:\n--- cryptsetup\n%s\n--- luksd\n%s", args, a, b)
		}
	}
}

func TestTokenRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	luks1 := newTwin(w, key, "--type", "luks1", "--pbkdf-force-iterations", "1000")
	for _, args := range [][]string{
		{"-v", "token", "add", "--key-description", "x", "IMG"},
		{"-v", "token", "export", "--token-id", "0", "IMG"},
		{"-v", "token", "remove", "--token-id", "0", "IMG"},
		{"-v", "token", "unassign", "--token-id", "0", "-S", "0", "IMG"},
		{"-v", "token", "remove", "--token-id", "0", "IMG.missing"},
		{"-v", "token", "remove", "--token-id", "0", key},
	} {
		luks1.run("", args...)
	}
}
