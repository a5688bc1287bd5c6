package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// What cryptsetup 2.6.1 reencrypt refuses in its arguments, luksd refuses
// with its words and exit code, and marks the volume where it does: each
// tool on its own copy. IMG is a LUKS2 volume (4096-byte sectors), DIR a
// directory, MISSING a path that does not exist, TAMPERED a volume marked
// for reencryption whose metadata was changed after (the reencryption
// digest no longer verifies), BACKWARD one whose direction was changed,
// MARKED one marked for reencryption (given as the copy IMG).
func TestReencryptArgumentsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, bad := w.key("key", "pw"), w.key("bad", "nope")
	base := w.image("base.img")
	w.cs(nil, append([]string{"luksFormat", "-q", "--sector-size", "4096", base, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	tampered := w.path("tampered.img")
	copyFile(t, base, tampered)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, tampered).ok(t)
	rewriteJSON(t, tampered, func(js string) string {
		const final = `"sector_size":4096,"flags":["backup-final"]`
		if !strings.Contains(js, final) {
			t.Fatalf("no backup-final segment of 4096-byte sectors in %s", js)
		}
		return strings.Replace(js, final, `"sector_size":512,"flags":["backup-final"]`, 1)
	})
	// MARKED is a volume marked for reencryption (by cryptsetup).
	markedImg := w.path("marked.img")
	copyFile(t, base, markedImg)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, markedImg).ok(t)
	// And one whose direction was changed to one luksd does not resume:
	// the digest still comes first.
	backward := w.path("backward.img")
	copyFile(t, base, backward)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, backward).ok(t)
	rewriteJSON(t, backward, func(js string) string {
		return strings.Replace(js, `"direction":"forward"`, `"direction":"backward"`, 1)
	})
	dir := w.path("dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ld := testtool.Luksd(t)
	for _, args := range [][]string{
		{"DIR"},
		{"MISSING"},
		{"DIR", "--encrypt", "--reduce-device-size", "8M"},
		{"DIR", "--encrypt", "--header", "NEWHDR"},
		{"IMG", "--header", "MISSING"},
		{"IMG", "--header", "DIR"},
		{"MISSING", "--header", "IMG"},
		{"MISSING", "--header", "MISSING"},
		{"MISSING", "--resume-only"},
		{"MISSING", "--decrypt", "--header", "NEWHDR"},
		{"DIR", "--decrypt", "--header", "NEWHDR"},
		{""},
		{"", "--encrypt"},
		{"TAMPERED"},
		{"TAMPERED", "--resume-only"},
		{"repair", "TAMPERED"},
		{"BACKWARD"},
		{"BACKWARD", "-d", bad},
		{"IMG", "--init-only", "--resilience", "bogus"},
		{"IMG", "--init-only", "--resilience-hash", "bogus"},
		{"IMG", "--init-only", "--resilience", "datashift"},
		{"IMG", "--init-only", "--resilience", "journal", "--resilience-hash", "bogus"},
		{"IMG", "--init-only", "--hotzone-size", "1k"},
		{"IMG", "--init-only", "--cipher", "bogus"},
		{"IMG", "--init-only", "--cipher", "aes"},
		{"IMG", "--init-only", "--cipher", "aes-xts"},
		{"IMG", "--init-only", "--cipher", "aes-bogus-plain64"},
		{"IMG", "--init-only", "--cipher", "cipher_null-ecb"},
		{"IMG", "--init-only", "--key-size", "8"},
		{"IMG", "--init-only", "--cipher", "aes-xts-plain64", "--key-size", "128"},
		{"IMG", "--init-only", "--cipher", "bogus", "--resilience", "bogus"},
		{"IMG", "--init-only", "--cipher", "bogus", "--resilience", "bogus", "--hash", "bogus"},
		{"IMG", "--init-only", "-d", bad, "--hash", "bogus"},
		{"IMG", "--init-only", "-d", bad, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "999"},
		{"IMG", "--init-only", "--init-only", "--resume-only"},
		{"IMG", "--keep-key"},
		{"MARKED", "--keep-key"},
		{"MARKED", "--decrypt"},
		{"MARKED", "--decrypt", "--init-only"},
		{"MARKED", "--encrypt", "--init-only"},
		{"MARKED", "--keep-key", "--init-only"},
		{"MARKED", "--resilience", "bogus"},
		{"MARKED", "--resilience", "datashift"},
		{"MARKED", "--resilience", "bogus", "-d", bad},
	} {
		var res [2]result
		var marked [2]bool
		for i, tool := range []string{w.cryptsetup, ld} {
			img, tam, hdr := w.path("copy.img"), w.path("tampered-copy.img"), w.path("new.hdr")
			back := w.path("backward-copy.img")
			copyFile(t, base, img)
			copyFile(t, tampered, tam)
			copyFile(t, backward, back)
			os.Remove(hdr)
			line := []string{"reencrypt", "--force-offline-reencrypt", "-q"}
			if !slices.Contains(args, "-d") {
				line = append(line, "-d", key)
			}
			for _, a := range args {
				switch a {
				case "repair":
					line = []string{"repair", "-q", "-d", key}
					continue
				case "IMG":
					a = img
				case "TAMPERED":
					a = tam
				case "BACKWARD":
					a = back
				case "MARKED":
					a = img
					copyFile(t, markedImg, img)
				case "DIR":
					a = dir
				case "MISSING":
					a = w.path("missing.img")
				case "NEWHDR":
					a = hdr
				}
				line = append(line, a)
			}
			res[i] = runTool(t, nil, tool, line...)
			marked[i] = strings.Contains(w.cs(nil, "luksDump", img).ok(t).stdout, "online-reencrypt")
		}
		what := fmt.Sprint(args)
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%s: cryptsetup exit %d %q, luksd exit %d %q", what, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
		if marked[0] != marked[1] {
			t.Errorf("%s: cryptsetup marked the volume: %v, luksd: %v", what, marked[0], marked[1])
		}
	}
}
