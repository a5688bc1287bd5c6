package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Interop with the real cryptsetup on image files, both directions.

// cheapPBKDF returns flags for a fast keyslot of kind pbkdf.
func cheapPBKDF(kind string) []string {
	if kind == "pbkdf2" {
		return []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	}
	return []string{"--pbkdf", kind, "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32", "--pbkdf-parallel", "1"}
}

type volumeParams struct {
	cipher  string
	keyBits string
	sector  string
	pbkdf   string
}

var interopParams = []volumeParams{
	{"aes-xts-plain64", "256", "512", "pbkdf2"},
	{"aes-xts-plain64", "512", "4096", "argon2id"},
	{"aes-cbc-essiv:sha256", "256", "512", "argon2i"},
}

func (p volumeParams) formatArgs() []string {
	return append([]string{"--cipher", p.cipher, "--key-size", p.keyBits, "--sector-size", p.sector}, cheapPBKDF(p.pbkdf)...)
}

func (p volumeParams) String() string {
	return strings.NewReplacer(":", "_").Replace(p.cipher + "-" + p.keyBits + "-" + p.sector + "-" + p.pbkdf)
}

// workspace holds image and key files of one test.
//
// The long cross-tool comparisons that touch nothing but their own
// workspace call t.Parallel: Go starts them once every sequential test of
// the package has finished, two at a time on two cores, where the
// package's tail used to run alone on one. Tests that time a kill, hold a
// lock across tools, start servers or use a run directory stay
// sequential.
type workspace struct {
	t          *testing.T
	dir        string
	cryptsetup string
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	return &workspace{t: t, dir: t.TempDir(), cryptsetup: testtool.Need(t, "cryptsetup")}
}

// image returns a new 20 MiB sparse image file.
func (w *workspace) image(name string) string {
	return testtool.ImageAt(w.t, w.dir, name, 20<<20)
}

// key writes a key file holding pass.
func (w *workspace) key(name, pass string) string {
	p := filepath.Join(w.dir, name)
	if err := os.WriteFile(p, []byte(pass), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// formatted returns vol.img, formatted by cryptsetup with a cheap kind
// PBKDF, and the key file ("pw") that opens it.
func (w *workspace) formatted(kind string) (img, key string) {
	w.t.Helper()
	img, key = w.image("vol.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF(kind)...)...).ok(w.t)
	return img, key
}

func (w *workspace) path(name string) string { return filepath.Join(w.dir, name) }

func (w *workspace) cs(stdin []byte, args ...string) result {
	w.t.Helper()
	return runTool(w.t, stdin, w.cryptsetup, args...)
}

func (w *workspace) luksd(stdin []byte, args ...string) result {
	w.t.Helper()
	return luksd(w.t, stdin, args...)
}

// ok fails the test unless r succeeded.
func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	return r
}

// volumeKey is the key in luksDump --dump-volume-key output, in hex.
func volumeKey(t *testing.T, dump string) string {
	t.Helper()
	return hex.EncodeToString(testtool.VolumeKey(t, dump))
}

// sameVolumeKey checks that cryptsetup and luksd unlock img with keyFile
// to the same volume key of keyBits bits, and returns it.
func (w *workspace) sameVolumeKey(img, keyFile string, keyBits int) string {
	w.t.Helper()
	a := volumeKey(w.t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", keyFile, img).ok(w.t).stdout)
	b := volumeKey(w.t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", keyFile, img).ok(w.t).stdout)
	if a != b {
		w.t.Fatalf("volume keys differ:\ncryptsetup %s\nluksd      %s", a, b)
	}
	if len(a) != keyBits/4 {
		w.t.Fatalf("volume key %s has %d bits, want %d", a, len(a)*4, keyBits)
	}
	return a
}

// sameOutput checks that both tools print the same for args.
func (w *workspace) sameOutput(args ...string) {
	w.t.Helper()
	a := w.cs(nil, args...).ok(w.t).stdout
	b := w.luksd(nil, args...).ok(w.t).stdout
	if a != b {
		w.t.Fatalf("%v differs:\n--- cryptsetup\n%s\n--- luksd\n%s", args, a, b)
	}
}

// opens checks whether cryptsetup accepts keyFile for img.
func (w *workspace) opens(img, keyFile string) bool {
	w.t.Helper()
	r := w.cs(nil, "open", "--test-passphrase", "-d", keyFile, img)
	if r.code != 0 && r.code != 2 {
		w.t.Fatalf("cryptsetup open --test-passphrase: exit %d: %s", r.code, r.stderr)
	}
	return r.code == 0
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestInteropLuksdFormatsCryptsetupOpens(t *testing.T) {
	for _, p := range interopParams {
		t.Run(p.String(), func(t *testing.T) {
			w := newWorkspace(t)
			img, key := w.image("vol.img"), w.key("key", "luksd passphrase")
			args := append([]string{"luksFormat", "-q", "--label", "made-by-luksd"}, p.formatArgs()...)
			w.luksd(nil, append(args, img, key)...).ok(t)

			if !w.opens(img, key) {
				t.Fatal("cryptsetup does not accept the passphrase")
			}
			if w.opens(img, w.key("bad", "wrong")) {
				t.Fatal("cryptsetup accepts a wrong passphrase")
			}
			dump := w.cs(nil, "luksDump", img).ok(t).stdout
			for _, want := range []string{
				"cipher: " + p.cipher, "sector: " + p.sector + " [bytes]",
				"PBKDF:      " + p.pbkdf, "Label:         \tmade-by-luksd",
			} {
				if !strings.Contains(dump, want) {
					t.Errorf("cryptsetup luksDump lacks %q:\n%s", want, dump)
				}
			}
			w.sameVolumeKey(img, key, atoiT(t, p.keyBits))
			w.sameOutput("luksDump", img)
			w.sameOutput("luksDump", "--type", "luks2", img)
			w.sameOutput("luksDump", "--dump-volume-key", "-q", "-d", key, img)
			uuid := strings.TrimSpace(w.cs(nil, "luksUUID", img).ok(t).stdout)
			if got := strings.TrimSpace(w.luksd(nil, "luksUUID", img).ok(t).stdout); got != uuid {
				t.Fatalf("luksUUID: luksd %q, cryptsetup %q", got, uuid)
			}
			w.luksd(nil, "isLuks", img).ok(t)
		})
	}
}

func TestInteropCryptsetupFormatsLuksdEdits(t *testing.T) {
	for _, p := range interopParams {
		t.Run(p.String(), func(t *testing.T) {
			w := newWorkspace(t)
			img := w.image("vol.img")
			k0, k1, k2 := w.key("k0", "first"), w.key("k1", "second"), w.key("k2", "third")
			w.cs(nil, append(append([]string{"luksFormat", "-q"}, p.formatArgs()...), img, k0)...).ok(t)
			vk := w.sameVolumeKey(img, k0, atoiT(t, p.keyBits))

			// luksAddKey with the existing key file and a positional new one.
			w.luksd(nil, append([]string{"luksAddKey", "-d", k0, img, k1}, cheapPBKDF(p.pbkdf)...)...).ok(t)
			if !w.opens(img, k1) || !w.opens(img, k0) {
				t.Fatal("cryptsetup does not accept both passphrases after luksAddKey")
			}
			if !strings.Contains(w.cs(nil, "luksDump", img).ok(t).stdout, "  1: luks2") {
				t.Fatal("cryptsetup does not see keyslot 1")
			}

			// luksChangeKey: k1 becomes k2.
			w.luksd(nil, append([]string{"luksChangeKey", "-d", k1, img, k2}, cheapPBKDF(p.pbkdf)...)...).ok(t)
			if w.opens(img, k1) || !w.opens(img, k2) {
				t.Fatal("after luksChangeKey cryptsetup must refuse the old and accept the new passphrase")
			}
			if got := w.sameVolumeKey(img, k2, atoiT(t, p.keyBits)); got != vk {
				t.Fatal("volume key changed")
			}
			// As cryptsetup does for LUKS2, the passphrase keeps its keyslot.
			dump := w.cs(nil, "luksDump", img).ok(t).stdout
			if !strings.Contains(dump, "  1: luks2") || strings.Contains(dump, "  2: luks2") {
				t.Fatalf("luksChangeKey moved the keyslot:\n%s", dump)
			}
			if !strings.Contains(w.cs(nil, "open", "--test-passphrase", "-v", "-d", k2, img).ok(t).stdout, "Key slot 1 unlocked.") {
				t.Fatal("the new passphrase does not open keyslot 1")
			}

			// config --label / --subsystem.
			w.luksd(nil, "config", img, "--label", "edited", "--subsystem", "sub").ok(t)
			dump = w.cs(nil, "luksDump", img).ok(t).stdout
			if !strings.Contains(dump, "Label:         \tedited") || !strings.Contains(dump, "Subsystem:     \tsub") {
				t.Fatalf("cryptsetup does not see the label:\n%s", dump)
			}

			// luksKillSlot 0, proving with the remaining passphrase k2.
			w.luksd(nil, "luksKillSlot", "-d", k2, img, "0").ok(t)
			if w.opens(img, k0) || !w.opens(img, k2) {
				t.Fatal("after luksKillSlot 0 only the other passphrase may open")
			}
			// A remaining passphrase is required: k0 is gone, so this fails with 2.
			w.luksd(nil, "luksKillSlot", "-d", k0, img, "1").expect(t, 2, "No key available with this passphrase.")

			// luksAddKey with piped passphrases (one line each), then
			// luksRemoveKey of k2 by key file.
			w.luksd([]byte("third\nfourth\n"), append([]string{"luksAddKey", img, "--key-slot", "5"}, cheapPBKDF(p.pbkdf)...)...).ok(t)
			k4 := w.key("k4", "fourth")
			if !strings.Contains(w.cs(nil, "luksDump", img).ok(t).stdout, "  5: luks2") || !w.opens(img, k4) {
				t.Fatal("cryptsetup does not see the piped passphrase in keyslot 5")
			}
			// --new-keyfile names the new key as the positional would.
			k6 := w.key("k6", "sixth")
			w.luksd(nil, append([]string{"luksAddKey", img, "-d", k4, "--new-keyfile", k6, "-S", "6"}, cheapPBKDF(p.pbkdf)...)...).ok(t)
			if !strings.Contains(w.cs(nil, "open", "--test-passphrase", "-v", "-d", k6, img).ok(t).stdout, "Key slot 6 unlocked.") {
				t.Fatal("--new-keyfile did not land in keyslot 6")
			}
			w.luksd(nil, "luksRemoveKey", "-d", k2, img).ok(t)
			if w.opens(img, k2) || !w.opens(img, k4) {
				t.Fatal("luksRemoveKey removed the wrong keyslot")
			}
			if got := w.sameVolumeKey(img, k4, atoiT(t, p.keyBits)); got != vk {
				t.Fatal("volume key changed")
			}
			w.sameOutput("luksDump", img)
			w.sameOutput("luksDump", "--dump-json-metadata", img)
		})
	}
}

func TestInteropUUIDAndIsLuks(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	const uuid = "12345678-9abc-def0-1234-56789abcdef0"
	w.luksd(nil, "luksUUID", "-q", img, "--uuid", uuid).ok(t)
	if got := strings.TrimSpace(w.cs(nil, "luksUUID", img).ok(t).stdout); got != uuid {
		t.Fatalf("cryptsetup sees UUID %q, want %q", got, uuid)
	}
	w.luksd(nil, "isLuks", "--type", "luks2", img).ok(t)
	w.luksd(nil, "isLuks", "--type", "luks1", img).expect(t, 1, "")
	if !w.opens(img, key) {
		t.Fatal("volume no longer opens after luksUUID --uuid")
	}
}

func TestInteropHeaderBackupRestore(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("argon2id")
	vk := w.sameVolumeKey(img, key, 512)

	// The same header backed up by both tools is the same file, and the
	// options parse before the verb and after the device alike.
	csBackup, lBackup, lBackup2 := w.path("cs.hdr"), w.path("luksd.hdr"), w.path("luksd2.hdr")
	w.cs(nil, "luksHeaderBackup", img, "--header-backup-file", csBackup).ok(t)
	w.luksd(nil, "--header-backup-file", lBackup, "luksHeaderBackup", img).ok(t)
	w.luksd(nil, "luksHeaderBackup", img, "--header-backup-file", lBackup2).ok(t)
	a, _ := os.ReadFile(csBackup)
	b, _ := os.ReadFile(lBackup)
	c, _ := os.ReadFile(lBackup2)
	if len(a) == 0 || !bytes.Equal(a, b) || !bytes.Equal(b, c) {
		t.Fatalf("header backups differ (cryptsetup %d bytes, luksd %d and %d bytes)", len(a), len(b), len(c))
	}
	if fi, _ := os.Stat(lBackup); fi.Mode().Perm() != 0o400 {
		t.Fatalf("backup mode %v, want 0400 as cryptsetup", fi.Mode().Perm())
	}
	w.luksd(nil, "luksHeaderBackup", img, "--header-backup-file", lBackup).expect(t, 1, "already exists")

	wipe := func(off, n int64) {
		f, err := os.OpenFile(img, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, n), off); err != nil {
			t.Fatal(err)
		}
	}

	// A wiped primary binary header: the secondary copy still opens.
	wipe(0, 4096)
	if !w.opens(img, key) {
		t.Fatal("cryptsetup cannot open with the primary header wiped")
	}
	if got := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, img).ok(t).stdout); got != vk {
		t.Fatal("luksd unlocks a different key from the secondary header")
	}

	// Whole header area gone: restore cryptsetup's backup with luksd.
	wipe(0, int64(len(a)))
	w.luksd(nil, "isLuks", img).expect(t, 1, "")
	w.luksd(nil, "luksHeaderRestore", "-q", img, "--header-backup-file", csBackup).ok(t)
	if !w.opens(img, key) || w.sameVolumeKey(img, key, 512) != vk {
		t.Fatal("volume does not open after luksd restored cryptsetup's backup")
	}

	// And the other way: cryptsetup restores luksd's backup.
	wipe(0, int64(len(a)))
	w.cs(nil, "luksHeaderRestore", "-q", img, "--header-backup-file", lBackup).ok(t)
	if !w.opens(img, key) || w.sameVolumeKey(img, key, 512) != vk {
		t.Fatal("volume does not open after cryptsetup restored luksd's backup")
	}

	// A file that is not a header backup is refused.
	w.luksd(nil, "luksHeaderRestore", "-q", img, "--header-backup-file", key).expect(t, 1, "Header backup file does not contain compatible LUKS header.")
}

func TestInteropDetachedHeader(t *testing.T) {
	w := newWorkspace(t)
	img, key, hdr := w.image("data.img"), w.key("key", "pw"), w.path("hdr.img")
	w.luksd(nil, append([]string{"luksFormat", "-q", "--header", hdr, img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	r := w.cs(nil, "open", "--test-passphrase", "--header", hdr, "-d", key, img)
	r.ok(t)
	dump := w.cs(nil, "luksDump", hdr).ok(t).stdout
	if !strings.Contains(dump, "offset: 0 [bytes]") {
		t.Fatalf("detached header's data segment does not start at 0:\n%s", dump)
	}
	w.luksd(nil, "isLuks", img).expect(t, 1, "")
	a := volumeKey(t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "--header", hdr, "-d", key, img).ok(t).stdout)
	b := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "--header", hdr, "-d", key, img).ok(t).stdout)
	if a != b {
		t.Fatal("volume keys differ with a detached header")
	}

	// Edits and backups go to the header file, never the data device.
	dataBefore, _ := os.ReadFile(img)
	k2 := w.key("k2", "second")
	w.luksd(nil, append([]string{"luksAddKey", "--header", hdr, "-d", key, img, k2}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, "open", "--test-passphrase", "--header", hdr, "-d", k2, img).ok(t)
	w.luksd(nil, "config", "--header", hdr, "--label", "detached", img).ok(t)
	if !strings.Contains(w.cs(nil, "luksDump", hdr).ok(t).stdout, "Label:         \tdetached") {
		t.Fatal("config --header did not label the header file")
	}
	backup := w.path("hdr.backup")
	w.luksd(nil, "luksHeaderBackup", "--header", hdr, img, "--header-backup-file", backup).ok(t)
	h1, _ := os.ReadFile(hdr)
	h2, _ := os.ReadFile(backup)
	if !bytes.Equal(h1, h2) {
		t.Fatal("the backup of a detached header is not the header file")
	}
	if dataAfter, _ := os.ReadFile(img); !bytes.Equal(dataBefore, dataAfter) {
		t.Fatal("an edit with --header wrote to the data device")
	}
}

func TestInteropExitCodes(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	bad := w.key("bad", "nope")
	w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", bad, img).expect(t, 2, "No key available with this passphrase.")
	w.luksd(nil, "luksAddKey", "-d", bad, img, key).expect(t, 2, "No key available with this passphrase.")
	w.luksd(nil, "luksRemoveKey", "-d", bad, img).expect(t, 2, "No key available with this passphrase.")
	w.luksd([]byte("nope\n"), "luksDump", "--dump-volume-key", "-q", img).expect(t, 2, "No key available with this passphrase.")
	w.luksd([]byte(""), "luksDump", "--dump-volume-key", "-q", img).expect(t, 1, "Nothing to read on input.")
	w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", w.path("absent"), img).expect(t, 1, "Failed to open key file.")
	w.luksd(nil, "luksKillSlot", "-q", img, "3").expect(t, 1, "Keyslot 3 is not active.")
	w.luksd(nil, "luksKillSlot", "-q", img, "40").expect(t, 1, "Key slot 40 is invalid.")
	w.luksd(nil, "luksAddKey", "-d", key, "-S", "0", img, bad).expect(t, 1, "Key slot 0 is full")
	// Piped passphrase: one line, the rest is not part of it.
	r := w.luksd([]byte("pw\ntrailing"), "luksDump", "--dump-volume-key", "-q", "-v", img)
	r.ok(t)
	if !strings.Contains(r.stdout, "Key slot 0 unlocked.") || !strings.HasSuffix(r.stdout, "Command successful.\n") {
		t.Fatalf("-v output: %q", r.stdout)
	}
	// Keyfile offset and size select the passphrase inside a larger file.
	big := w.key("big", "xxxpwyyy")
	w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", big, "--keyfile-offset", "3", "-l", "2", img).ok(t)
	w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", big, img).expect(t, 2, "No key available")
	// JSON metadata is what cryptsetup prints.
	js := w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(t).stdout
	if got := w.luksd(nil, "luksDump", "--dump-json-metadata", img).ok(t).stdout; got != js {
		t.Fatalf("--dump-json-metadata differs:\nluksd      %q\ncryptsetup %q", got, js)
	}
}

func TestInteropFormatLayoutOptions(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("vol.img"), w.key("key", "pw")
	vkFile := w.path("vk")
	vk := bytes.Repeat([]byte{0x5a, 0xa5, 0x01, 0xfe}, 16)
	if err := os.WriteFile(vkFile, vk, 0o600); err != nil {
		t.Fatal(err)
	}
	const uuid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	w.luksd(nil, append([]string{"luksFormat", img, key, "-q",
		"--uuid", uuid, "--subsystem", "tests", "--volume-key-file", vkFile,
		"--luks2-metadata-size", "65536", "--luks2-keyslots-size", "4194304",
		"--offset", "16384", "--key-slot", "3"}, cheapPBKDF("argon2id")...)...).ok(t)
	dump := w.cs(nil, "luksDump", img).ok(t).stdout
	for _, want := range []string{
		"UUID:          \t" + uuid, "Subsystem:     \ttests",
		"Metadata area: \t65536 [bytes]", "Keyslots area: \t4194304 [bytes]",
		"offset: 8388608 [bytes]", "  3: luks2",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("cryptsetup luksDump lacks %q:\n%s", want, dump)
		}
	}
	if got := w.sameVolumeKey(img, key, 512); got != fmt.Sprintf("%x", vk) {
		t.Fatalf("volume key %s, want the --volume-key-file's %x", got, vk)
	}
}

func TestInteropFormatHashLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	dumps := map[string]string{}
	for tool, run := range map[string]func([]byte, ...string) result{"cs": w.cs, "luksd": w.luksd} {
		img := w.image(tool + ".img")
		run(nil, append([]string{"luksFormat", "-q", "-h", "sha512", "--uuid", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
		// Salts and digests are random; the rest must be the same.
		var keep []string
		for _, l := range strings.Split(w.cs(nil, "luksDump", img).ok(t).stdout, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "Salt:") && !strings.HasPrefix(l, "\t            ") && !strings.HasPrefix(strings.TrimSpace(l), "Digest:") {
				keep = append(keep, l)
			}
		}
		dumps[tool] = strings.Join(keep, "\n")
	}
	if dumps["cs"] != dumps["luksd"] {
		t.Fatalf("luksFormat -h sha512 differs:\n--- cryptsetup\n%s\n--- luksd\n%s", dumps["cs"], dumps["luksd"])
	}
	if strings.Count(dumps["luksd"], "sha512") != 3 {
		t.Fatalf("sha512 is not the keyslot, AF and digest hash:\n%s", dumps["luksd"])
	}
}

func TestInteropLUKS1Refusals(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("vol.img"), w.key("key", "pw")
	w.cs(nil, "luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", img, key).ok(t)
	w.sameVolumeKey(img, key, 512)
	w.luksd(nil, "isLuks", "--type", "luks1", img).ok(t)
	w.luksd(nil, "isLuks", "--type", "luks2", img).expect(t, 1, "")
	if got := strings.TrimSpace(w.luksd(nil, "luksUUID", img).ok(t).stdout); got != strings.TrimSpace(w.cs(nil, "luksUUID", img).ok(t).stdout) {
		t.Fatalf("LUKS1 UUID %q differs", got)
	}
	// What LUKS1 cannot take is refused in one line, and the header stays
	// as it was (keys_luks1_test.go checks the edits it takes).
	before, _ := os.ReadFile(img)
	w.luksd(nil, "luksAddKey", "-d", key, img, key, "--pbkdf", "argon2id").expect(t, 1, "LUKS1")
	w.luksd(nil, "config", "--label", "x", img).expect(t, 1, "LUKS2")
	after, _ := os.ReadFile(img)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused edit changed the LUKS1 image")
	}
}

func TestInteropCipherAuto(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("vol.img"), w.key("key", "pw")
	r := w.luksd(nil, append([]string{"luksFormat", "-q", "-v", "--cipher", "auto", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	if !strings.Contains(r.stdout, "chosen: ") {
		t.Fatalf("-v does not say which cipher was chosen: %q", r.stdout)
	}
	dump := w.cs(nil, "luksDump", img).ok(t).stdout
	switch {
	case strings.Contains(dump, "cipher: aes-xts-plain64"):
		w.sameVolumeKey(img, key, 512)
	case strings.Contains(dump, "cipher: xchacha12,aes-adiantum-plain64"):
		// cryptsetup needs the kernel's Adiantum to unlock; luksd alone here.
		if !strings.Contains(dump, "sector: 4096 [bytes]") {
			t.Fatalf("Adiantum without 4096-byte sectors:\n%s", dump)
		}
		w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, img).ok(t)
	default:
		t.Fatalf("--cipher auto chose neither AES-XTS nor Adiantum:\n%s", dump)
	}
}

func TestInteropKillSlotBatchWithoutInput(t *testing.T) {
	w := newWorkspace(t)
	img, k0, k1 := w.image("vol.img"), w.key("k0", "zero"), w.key("k1", "one")
	w.cs(nil, append([]string{"luksFormat", "-q", img, k0}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, append([]string{"luksAddKey", "-q", "-d", k0, img, k1}, cheapPBKDF("pbkdf2")...)...).ok(t)
	// Like cryptsetup: -q with empty standard input kills without asking.
	w.luksd([]byte{}, "luksKillSlot", "-q", img, "0").ok(t)
	if w.opens(img, k0) || !w.opens(img, k1) {
		t.Fatal("luksKillSlot -q did not wipe keyslot 0 alone")
	}
	// A wrong passphrase on standard input is still refused.
	w.luksd([]byte("nope\n"), "luksKillSlot", "-q", img, "1").expect(t, 2, "No key available with this passphrase.")
	if !w.opens(img, k1) {
		t.Fatal("a refused luksKillSlot wiped the keyslot")
	}
}

// TestInteropKeySourcesLikeCryptsetup feeds the same passphrase input to
// both tools and expects the same outcome: key files, offsets, sizes,
// standard input with and without --key-file -, newlines, limits.
func TestInteropKeySourcesLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	padded := w.key("padded", "xxpwyy")
	big := w.key("big", strings.Repeat("p", 8<<20+1))
	cases := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"stdin line", "pw\n", nil},
		{"stdin line without newline", "pw", nil},
		{"stdin line with trailing data", "pw\nmore", nil},
		{"stdin empty line", "\n", nil},
		{"stdin empty", "", nil},
		{"stdin with -l", "pwx\n", []string{"-l", "2"}},
		{"key file stdin", "pw", []string{"-d", "-"}},
		{"key file stdin keeps newline", "pw\n", []string{"-d", "-"}},
		{"key file stdin offset", "xxpw", []string{"-d", "-", "--keyfile-offset", "2"}},
		{"key file", "", []string{"-d", key}},
		{"key file offset size", "", []string{"-d", padded, "--keyfile-offset", "2", "-l", "2"}},
		{"key file whole", "", []string{"-d", padded}},
		{"key file short", "", []string{"-d", padded, "--keyfile-offset", "2", "-l", "10"}},
		{"key file offset past end", "", []string{"-d", padded, "--keyfile-offset", "100"}},
		{"key file too big", "", []string{"-d", big}},
		{"key file missing", "", []string{"-d", w.path("absent")}},
		{"key slot", "", []string{"-d", key, "-S", "0"}},
		{"inactive key slot ignored", "", []string{"-d", key, "-S", "1"}},
		{"stdin line offset", "xpw\n", []string{"--keyfile-offset", "1"}},
		{"stdin line shorter than size", "pw\n", []string{"-l", "3"}},
		{"stdin offset eats the newline", "xx\n", []string{"--keyfile-offset", "3"}},
		{"key file offset to the end", "", []string{"-d", padded, "--keyfile-offset", "6"}},
		{"key file empty", "", []string{"-d", w.key("empty", "")}},
		{"key file stdin offset to the end", "xx", []string{"-d", "-", "--keyfile-offset", "2"}},
		{"key file stdin empty", "", []string{"-d", "-"}},
	}
	for _, c := range cases {
		args := append([]string{"luksDump", "--dump-volume-key", "-q", img}, c.args...)
		want := w.cs([]byte(c.stdin), args...)
		got := w.luksd([]byte(c.stdin), args...)
		if got.code != want.code {
			t.Errorf("%s: luksd exit %d (%q), cryptsetup exit %d (%q)", c.name, got.code, got.stderr, want.code, want.stderr)
			continue
		}
		if want.code == 0 && volumeKey(t, got.stdout) != volumeKey(t, want.stdout) {
			t.Errorf("%s: different volume keys", c.name)
		}
		if lastLine(got.stderr) != lastLine(want.stderr) {
			t.Errorf("%s: luksd says %q, cryptsetup %q", c.name, got.stderr, want.stderr)
		}
	}
}

func TestInteropKeySlotOptionLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	for _, args := range [][]string{
		{"luksChangeKey", img, "-d", key, "-S", "1", key},
		{"luksChangeKey", img, "-d", key, "-S", "40", key},
		{"luksAddKey", img, "-d", key, "-S", "1", "--new-key-slot", "2", key},
		{"luksRemoveKey", img, "-d", key, "-S", "0"},
	} {
		want := w.cs(nil, args...)
		got := w.luksd(nil, args...)
		// cryptsetup is silent for some of these, and prefixes its name
		// to others; the codes must match and the texts where it has one.
		if got.code != want.code || !strings.HasSuffix(lastLine(want.stderr), lastLine(got.stderr)) && want.stderr != "" {
			t.Errorf("%v: luksd exit %d %q, cryptsetup exit %d %q", args, got.code, got.stderr, want.code, lastLine(want.stderr))
		}
	}
	if !w.opens(img, key) {
		t.Fatal("a refused command changed the volume")
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestInteropErrorsLikeCryptsetup runs failing commands through both tools
// and expects the same exit code, and cryptsetup's text where it has one.
func TestInteropErrorsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key, bad := w.image("vol.img"), w.key("key", "pw"), w.key("bad", "nope")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	plain := testtool.ImageAt(t, w.dir, "plain.img", 1<<20)
	missing := w.path("missing")
	exists := w.key("exists", "x")
	empty := w.image("empty.img") // a LUKS2 header without keyslots
	w.cs(nil, append([]string{"luksFormat", "-q", empty, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, "erase", "-q", empty).ok(t)
	before, _ := os.ReadFile(img)
	for _, args := range [][]string{
		{"luksDump", missing},
		{"luksDump", plain},
		{"luksDump"},
		{"isLuks", plain},
		{"isLuks", "-v", plain},
		{"isLuks", missing},
		{"luksUUID", plain},
		{"luksUUID", "--uuid", "bad-uuid", img},
		{"luksKillSlot", "-q", img, "3"},
		{"luksKillSlot", "-q", img, "40"},
		{"luksKillSlot", "-q", img},
		{"luksKillSlot", "-d", bad, img, "0"},
		{"luksHeaderBackup", img},
		{"luksHeaderBackup", plain, "--header-backup-file", w.path("new")},
		{"luksHeaderBackup", img, "--header-backup-file", exists},
		{"luksHeaderRestore", "-q", img, "--header-backup-file", exists},
		{"luksHeaderRestore", "-q", img, "--header-backup-file", missing},
		{"luksAddKey", "-d", bad, img, key},
		{"luksAddKey", "-d", key, img, missing},
		{"luksAddKey", "-d", missing, img, key},
		{"luksChangeKey", "-d", bad, img, key},
		{"luksRemoveKey", "-d", bad, img},
		{"luksFormat", "-q", plain, missing},
		{"luksFormat", "-q", missing, key},
		{"luksFormat", "-q", "--cipher", "aes-xts-plain64", "--key-size", "100", plain, key},
		{"config", "--label", "x", plain},
		{"luksDump", "--dump-volume-key", "-q", "-d", bad, img},
		{"luksDump", "--type", "luks1", img},
		{"luksAddKey", "-d", key, empty, key},
		{"luksChangeKey", "-d", key, empty, key},
		{"luksRemoveKey", "-d", key, empty},
		{"open", "--test-passphrase", "-d", key, empty},
		{"luksFormat", "-q", "--uuid", "bad", plain, key},
		{"luksUUID", "--type", "luks1", img},
		{"luksAddKey", "--type", "luks1", "-d", key, img, key},
	} {
		want := w.cs(nil, args...)
		got := w.luksd(nil, args...)
		if want.code == 0 {
			t.Fatalf("%v: cryptsetup succeeded; not an error case", args)
		}
		if got.code != want.code || want.stderr != "" && !strings.HasSuffix(lastLine(want.stderr), lastLine(got.stderr)) {
			t.Errorf("%v:\n  luksd      exit %d %q\n  cryptsetup exit %d %q", args[0], got.code, lastLine(got.stderr), want.code, lastLine(want.stderr))
		}
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("a failed command changed the image")
	}
}

func TestInteropDumpVolumeKeyToFile(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	csFile, lFile := w.path("cs.vk"), w.path("luksd.vk")
	want := w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, "--volume-key-file", csFile, img).ok(t).stdout
	got := w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, "--volume-key-file", lFile, img).ok(t).stdout
	if strings.ReplaceAll(want, csFile, lFile) != got {
		t.Fatalf("output differs:\n--- cryptsetup\n%s--- luksd\n%s", want, got)
	}
	a, _ := os.ReadFile(csFile)
	b, _ := os.ReadFile(lFile)
	if len(a) != 64 || !bytes.Equal(a, b) {
		t.Fatalf("volume key files differ (%d and %d bytes)", len(a), len(b))
	}
	if fi, _ := os.Stat(lFile); fi.Mode().Perm() != 0o400 {
		t.Fatalf("key file mode %v, want 0400", fi.Mode().Perm())
	}
	w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, "--volume-key-file", lFile, img).expect(t, 1, "Cannot open keyfile "+lFile+" for write.")
	// The key file formats a volume with the same key.
	img2 := w.image("vol2.img")
	w.luksd(nil, append([]string{"luksFormat", "-q", "--volume-key-file", lFile, img2, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	if w.sameVolumeKey(img2, key, 512) != fmt.Sprintf("%x", a) {
		t.Fatal("luksFormat --volume-key-file did not use the dumped key")
	}
}

// TestInteropVerboseLikeCryptsetup runs the same -v sequence of edits
// through both tools on two copies of a volume and compares what they print.
func TestInteropVerboseLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, kb := w.key("key", "pw"), w.key("kb", "b")
	imgs := map[string]string{"cs": w.image("cs.img"), "luksd": w.image("luksd.img")}
	run := map[string]func([]byte, ...string) result{"cs": w.cs, "luksd": w.luksd}
	pb := cheapPBKDF("pbkdf2")
	steps := [][]string{
		append([]string{"luksFormat", "-q", "-v", "IMG", key}, pb...),
		append([]string{"luksFormat", "-q", "-v", "IMG", key}, pb...), // over an existing header
		append([]string{"luksAddKey", "-v", "-d", key, "IMG", kb}, pb...),
		{"open", "--test-passphrase", "-v", "-d", kb, "IMG"},
		{"luksDump", "--dump-volume-key", "-q", "-v", "-d", kb, "IMG"},
		append([]string{"luksChangeKey", "-v", "-d", kb, "IMG", kb}, pb...),
		{"luksRemoveKey", "-v", "-d", kb, "IMG"},
		append([]string{"luksAddKey", "-v", "-d", key, "IMG", kb, "-S", "7"}, pb...),
		{"luksKillSlot", "-v", "-d", kb, "IMG", "0"},
		{"luksKillSlot", "-v", "-d", kb, "IMG", "7", "-q"},
		append([]string{"luksAddKey", "-v", "-d", kb, "IMG", key}, pb...),
		{"erase", "-q", "-v", "IMG"},
		{"luksErase", "-q", "-v", "IMG"},
		{"isLuks", "-v", "IMG"},
	}
	for _, step := range steps {
		out := map[string]string{}
		for tool, img := range imgs {
			args := append([]string(nil), step...)
			for i := range args {
				if args[i] == "IMG" {
					args[i] = img
				}
			}
			r := run[tool](nil, args...)
			out[tool] = strings.ReplaceAll(fmt.Sprintf("exit %d\n%s", r.code, r.stdout), img, "IMG")
		}
		if step[0] == "luksDump" {
			// Keys and UUIDs differ between the two volumes.
			for tool := range out {
				out[tool] = strings.Join(slicesFilter(strings.Split(out[tool], "\n"), func(l string) bool {
					return strings.HasPrefix(l, "Key slot") || strings.HasPrefix(l, "Command") || strings.HasPrefix(l, "exit")
				}), "\n")
			}
		}
		if out["cs"] != out["luksd"] {
			t.Errorf("%s -v:\n--- cryptsetup\n%s\n--- luksd\n%s", step[0], out["cs"], out["luksd"])
		}
	}
}

func slicesFilter(in []string, keep func(string) bool) []string {
	var out []string
	for _, s := range in {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func TestInteropAdiantumHeader(t *testing.T) {
	// cryptsetup reads but cannot unlock Adiantum keyslots without the
	// kernel's Adiantum (the VM suite covers that); the header must still
	// be the one it expects.
	w := newWorkspace(t)
	img, key, k2 := w.image("vol.img"), w.key("key", "pw"), w.key("k2", "second")
	w.luksd(nil, append([]string{"luksFormat", "-q", "-c", "xchacha12,aes-adiantum-plain64", "-s", "256",
		"--sector-size", "4096", img, key}, cheapPBKDF("argon2id")...)...).ok(t)
	w.sameOutput("luksDump", img)
	vk := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, img).ok(t).stdout)
	if len(vk) != 64 {
		t.Fatalf("Adiantum volume key of %d bits", len(vk)*4)
	}
	w.luksd(nil, append([]string{"luksAddKey", "-d", key, img, k2}, cheapPBKDF("pbkdf2")...)...).ok(t)
	if got := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "-d", k2, img).ok(t).stdout); got != vk {
		t.Fatal("the added passphrase unlocks another key")
	}
	if dump := w.cs(nil, "luksDump", img).ok(t).stdout; !strings.Contains(dump, "Cipher:     xchacha12,aes-adiantum-plain64") || !strings.Contains(dump, "  1: luks2") {
		t.Fatalf("cryptsetup does not see the Adiantum keyslots:\n%s", dump)
	}
}
