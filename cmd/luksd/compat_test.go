package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
	"golang.org/x/sys/unix"
)

// compatCase is one command line run through cryptsetup and luksd.
// {img}, {key} and {plain} in args are the test's LUKS2 image, its key
// file and a file that is not LUKS. Placeholders in args are replaced
// per tool: NEW is a new 20 MiB image,
// SMALL a 1 MiB one, COPY a copy of the LUKS2 image (luksFormat writes
// to its own file per tool).
type compatCase struct {
	args   []string
	stdout bool // the whole stdout must be the same (paths as IMG)
	// codeOnly: cryptsetup's message is about something luksd has not
	// (dm, the kernel's integrity target); only the exit code is compared.
	codeOnly bool
	layout   bool // compare the formatted images' layout in luksDump
}

// compatUUID is the UUID the luksFormat cases ask for.
const compatUUID = "12345678-9abc-def0-1234-56789abcdef0"

// compatFormat is luksFormat with a cheap PBKDF and extra.
func compatFormat(extra ...string) []string {
	return append(append([]string{"luksFormat"}, cheapPBKDF("pbkdf2")...), extra...)
}

// compatCases are the command lines TestCLILikeCryptsetup compares.
var compatCases = []compatCase{
	// No action, unknown ones, unknown and malformed options.
	{args: []string{}},
	{args: []string{"frobnicate", "{img}"}},
	{args: []string{"--frobnicate"}},
	{args: []string{"luksDump", "--frobnicate", "{img}"}},
	{args: []string{"luksDump", "--verb", "{img}"}}, // no prefix matching
	{args: []string{"luksDump", "-Z", "{img}"}},
	{args: []string{"luksDump", "-qZ", "{img}"}},
	{args: []string{"luksDump", "-h"}},
	{args: []string{"luksDump", "{img}", "--header"}},
	{args: []string{"luksDump", "{img}", "-d"}},
	{args: []string{"luksDump", "--batch-mode=1", "{img}"}},
	{args: []string{"luksDump", "-S", "abc", "{img}"}},
	{args: []string{"luksDump", "--key-slot=1x", "{img}"}},
	{args: []string{"luksDump", "--timeout", "-5", "{img}"}},
	// Missing arguments are counted before options are judged.
	{args: []string{"luksDump"}},
	{args: []string{"luksDump", "--label", "x"}},
	{args: []string{"-v", "isLuks"}},
	{args: []string{"luksKillSlot", "{img}"}},
	{args: []string{"luksFormat"}},
	{args: []string{"luksErase"}},
	{args: []string{"open"}},
	{args: []string{"luksOpen", "{img}"}},
	{args: []string{"close"}},
	{args: []string{"status"}},
	{args: []string{"open", "--type", "luks3", "{img}", "n"}},
	// Options an action refuses, under the action's own name.
	{args: []string{"luksDump", "--uuid", compatUUID, "{img}"}},
	{args: []string{"luksDump", "-s", "256", "{img}"}},
	{args: []string{"luksOpen", "--label", "x", "{img}", "n"}},
	{args: []string{"isLuks", "--offset", "5", "{img}"}},
	{args: []string{"luksErase", "--label", "x", "{img}"}},
	{args: []string{"luksDump", "--allow-discards", "{img}"}},
	{args: []string{"luksUUID", "-i", "100", "{img}"}},
	// cryptsetup refuses these although luksd's verb shares the flag.
	{args: []string{"luksKillSlot", "-S", "0", "-q", "{img}", "0"}},
	{args: []string{"luksRemoveKey", "-S", "0", "-d", "{key}", "{img}"}},
	{args: []string{"luksChangeKey", "--new-keyfile", "{key}", "-d", "{key}", "{img}"}},
	// open --test-passphrase and --type.
	{args: []string{"open", "--test-passphrase", "--type", "plain", "-d", "{key}", "{img}"}},
	{args: []string{"open", "--test-passphrase", "--type", "LUKS2", "-d", "{key}", "{img}"}},
	{args: []string{"open", "--test-passphrase", "--type", "luks3", "-d", "{key}", "{img}"}},
	{args: []string{"luksOpen", "--test-passphrase", "-M", "luks2", "-v", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"open", "--test-passphrase", "--offset", "8", "-d", "{key}", "{img}"}},
	{args: []string{"open", "--test-passphrase", "-r", "--key-file={key}", "-S0", "{img}"}, stdout: true},
	// Options an action accepts and ignores, as scripts pass them.
	{args: []string{"luksDump", "--disable-locks", "{img}"}, stdout: true},
	{args: []string{"luksDump", "--disable-external-tokens", "--disable-keyring", "{img}"}, stdout: true},
	{args: []string{"--debug-json", "isLuks", "{img}"}}, // cryptsetup debugs on stdout
	{args: []string{"luksDump", "-r", "--timeout", "5", "-T", "2", "{img}"}, stdout: true},
	{args: []string{"luksDump", "-h", "sha256", "-c", "aes", "{img}"}, stdout: true},
	{args: []string{"luksUUID", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"isLuks", "-y", "--cipher", "aes", "-v", "{img}"}, stdout: true},
	{args: []string{"-q", "--disable-locks", "--perf-same_cpu_crypt", "isLuks", "{img}"}, stdout: true},
	{args: []string{"luksDump", "-qv", "{img}"}, stdout: true},
	// Old option names.
	{args: []string{"luksDump", "--dump-master-key", "-q", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"luksDump", "--dump-master-key", "-d", "{key}", "-q", "-S0", "{img}"}, stdout: true},
	// isLuks and luksUUID on something else: exit 1 and no message.
	{args: []string{"isLuks", "-v", "{plain}"}, stdout: true},
	{args: []string{"luksUUID", "{plain}"}, stdout: true},
	{args: []string{"luksUUID", "--type", "luks1", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksDump", "{img}"}, stdout: true},
	// benchmark of a hash that is not there.
	{args: []string{"benchmark", "-h", "sha999"}, stdout: true},
	// luksFormat: checks, refusals and what it prints.
	{args: compatFormat("-q", "--key-slot", "32", "NEW", "{key}")},
	{args: compatFormat("-q", "--key-slot", "-2", "NEW", "{key}")},
	{args: compatFormat("-q", "--offset", "32769", "NEW", "{key}")},
	{args: compatFormat("-q", "--align-payload", "8", "--offset", "32768", "NEW", "{key}")},
	{args: compatFormat("-q", "-i", "100", "NEW", "{key}")},
	{args: compatFormat("-q", "--uuid", compatUUID, "--use-random", "NEW", "{key}"), layout: true},
	{args: compatFormat("-q", "--uuid", compatUUID, "--use-urandom", "-y", "NEW", "{key}"), layout: true},
	{args: compatFormat("-q", "--uuid", compatUUID, "--align-payload", "40000", "NEW", "{key}"), layout: true},
	{args: compatFormat("-q", "--uuid", compatUUID, "--align-payload=65536", "NEW", "{key}"), layout: true},
	{args: compatFormat("--uuid", compatUUID, "COPY", "{key}"), stdout: true, layout: true},
	{args: compatFormat("-q", "--uuid", compatUUID, "SMALL", "{key}"), stdout: true, layout: true},
	{args: compatFormat("-q", "--integrity", "hmac-sha256", "NEW", "{key}"), codeOnly: true},
	// A volume key file too short for the key, or missing.
	{args: compatFormat("-q", "--volume-key-file", "{key}", "NEW", "{key}")},
	{args: compatFormat("-q", "--type", "luks1", "--volume-key-file", "{key}", "NEW", "{key}")},
	{args: compatFormat("-q", "--volume-key-file", "{key}.missing", "NEW", "{key}")},
	// Arguments past the ones an action takes are ignored, but by isLuks.
	{args: []string{"luksDump", "{img}", "extra"}, stdout: true},
	{args: []string{"-v", "luksUUID", "{img}", "extra", "more"}, stdout: true},
	{args: []string{"-v", "luksKillSlot", "-q", "{img}", "5", "extra"}, stdout: true},
	{args: []string{"-v", "isLuks", "{img}", "extra"}, stdout: true},
	{args: []string{"isLuks", "{plain}.missing", "extra"}, stdout: true},
	// Usage errors: cryptsetup's usage() exits before -v's status
	// line; other failures end with "Command failed with code -1".
	{args: []string{"-v", "luksAddKey", "--unbound", "-d", "{key}", "{img}", "{key}"}, stdout: true},
	{args: []string{"-v", "luksAddKey", "-s", "100", "-d", "{key}", "{img}", "{key}"}, stdout: true},
	{args: []string{"-v", "luksAddKey", "--pbkdf", "scrypt", "-d", "{key}", "{img}", "{key}"}, stdout: true},
	{args: []string{"-v", "luksChangeKey", "-i", "100", "--pbkdf-force-iterations", "1000", "-d", "{key}", "{img}", "{key}"}, stdout: true},
	{args: []string{"-v", "config", "--priority", "foo", "-S", "0", "{img}"}, stdout: true},
	{args: []string{"-v", "config", "--priority", "normal", "{img}"}, stdout: true},
	{args: []string{"-v", "config", "{img}"}, stdout: true},
	{args: []string{"-v", "luksDump", "-S", "-1", "{img}"}, stdout: true},
	{args: []string{"-v", "luksDump", "--key-slot=-2"}, stdout: true},
	{args: []string{"-S", "-1", "--frobnicate", "luksDump"}, stdout: true},
	{args: []string{"-v", "luksKillSlot", "-S", "-1", "{img}", "0"}, stdout: true},
	{args: []string{"-v", "luksDump", "--unbound", "{img}"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "-d", "{key}", "{img}", "n"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "--type", "plain", "-d", "{key}", "{img}", "n"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "--test-passphrase", "--type", "tcrypt", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "--test-passphrase", "--type", "plain", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"-v", "open", "--unbound", "--test-passphrase", "--type", "luks3", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"-v", "benchmark", "--pbkdf", "scrypt"}, stdout: true},
	{args: []string{"-v", "benchmark", "-s", "100"}, stdout: true},
	{args: compatFormat("-v", "-q", "-s", "100", "NEW", "{key}"), stdout: true},
	{args: compatFormat("-v", "-q", "--sector-size", "1000", "NEW", "{key}"), stdout: true},
	{args: compatFormat("-v", "-q", "--type", "luks1", "--sector-size", "4096", "NEW", "{key}"), stdout: true},
	{args: compatFormat("-v", "-q", "--type", "luks1", "--luks2-metadata-size", "65536", "NEW", "{key}"), stdout: true},
	{args: compatFormat("-v", "-q", "--align-payload", "8", "--offset", "32768", "NEW", "{key}"), stdout: true},
	// (luksFormat -v -S 32 is left out: cryptsetup wipes the device's
	// signatures, and says so, before it refuses the slot.)
	{args: []string{"-v", "luksFormat", "-q", "--pbkdf", "scrypt", "NEW", "{key}"}, stdout: true},
	{args: []string{"-v", "luksFormat", "-q", "--pbkdf-force-iterations", "1000", "-i", "100", "NEW", "{key}"}, stdout: true},
	// --test-args makes every check cryptsetup makes before it acts.
	{args: []string{"--test-args", "luksFormat", "--key-size", "31", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--key-size", "31", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "benchmark", "--key-size", "31"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--key-size", "31", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--sector-size", "511", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--sector-size", "8192", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--pbkdf", "blah", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--pbkdf", "PBKDF2", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--pbkdf-force-iterations", "4", "-i1", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--pbkdf-force-iterations", "1000", "-i", "100", "{img}"}, stdout: true},
	{args: []string{"--test-args", "config", "--priority", "normal", "{img}"}, stdout: true},
	{args: []string{"--test-args", "config", "-S1", "--priority", "norma", "{img}"}, stdout: true},
	{args: []string{"--test-args", "config", "-S1", "--priority", "prefer", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--unbound", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--unbound", "--key-size", "0", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--unbound", "--key-size", "8", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksDump", "--unbound", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--unbound", "-S5", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--unbound", "--test-passphrase", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--align-payload", "8192", "--offset", "8192", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "-d", "{key}", "-d", "{key}", "{img}", "n"}, stdout: true},
	{args: []string{"open", "-d", "{key}", "--key-file", "{key}", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--use-urandom", "--use-random", "{img}"}, stdout: true},
	{args: compatFormat("-q", "--use-urandom", "--use-random", "NEW", "{key}"), stdout: true},
	{args: []string{"open", "--test-passphrase", "--key-size", "31", "-d", "{key}", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--persistent", "--test-passphrase", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--persistent", "--allow-discards", "--perf-no_read_workqueue", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "refresh", "--persistent", "n"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--persistent", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--refresh", "--test-passphrase", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--shared", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--shared", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "plainOpen", "--shared", "--offset", "2048", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "luks2", "--shared", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "luks1", "--skip", "8", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--offset", "8", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--sector-size", "1024", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--iv-large-sectors", "--sector-size", "512", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--device-size", "512", "--size", "1", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--test-passphrase", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--tcrypt-hidden", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--veracrypt", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "close", "--deferred", "--cancel-deferred", "n"}, stdout: true},
	{args: []string{"--test-args", "close", "--deferred", "n"}, stdout: true},
	{args: []string{"--test-args", "luksClose", "--cancel-deferred", "n"}, stdout: true},
	{args: []string{"--test-args", "status", "--deferred", "n"}, stdout: true},
	// (cryptsetup here cannot reach device-mapper, and says so first.)
	{args: []string{"close", "--deferred", "luksd-compat-none"}, codeOnly: true},
	{args: []string{"close", "--cancel-deferred", "luksd-compat-none"}, codeOnly: true},
	{args: []string{"--test-args", "luksFormat", "--integrity-no-wipe", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--keyslot-cipher", "aes-xts-plain64", "{img}"}, stdout: true},
	// Keyslot area encryption (keyslotcipher_test.go checks what is written).
	{args: []string{"--test-args", "luksFormat", "--keyslot-cipher", "aes-xts-plain64", "--keyslot-key-size", "256", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--keyslot-key-size", "0", "--keyslot-cipher", "aes-xts-plain64", "{img}"}, stdout: true},
	// cryptsetup names the first refused option in its table's order.
	{args: []string{"--test-args", "open", "--integrity-no-wipe", "--integrity", "hmac-sha256", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--use-urandom", "--use-random", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksDump", "--verify-passphrase", "--allow-discards", "--label", "x", "{img}"}, stdout: true},
	{args: []string{"--test-args", "reencrypt", "--reduce-device-size", "64m", "--device-size", "100g", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksAddKey", "--keyslot-key-size", "12", "--keyslot-cipher", "aes-xts-plain64", "{img}"}, stdout: true},
	{args: compatFormat("-q", "--uuid", compatUUID, "--keyslot-cipher", "aes-cbc-essiv:sha256", "--keyslot-key-size", "256", "NEW", "{key}"), stdout: true, layout: true},
	{args: compatFormat("-q", "--keyslot-cipher", "aes-xts-plain64", "--keyslot-key-size", "8", "NEW", "{key}"), stdout: true},
	// (cryptsetup says nothing here; luksd says it cannot use the cipher.)
	{args: compatFormat("-q", "--keyslot-cipher", "foo-xts-plain64", "--keyslot-key-size", "256", "NEW", "{key}"), codeOnly: true},
	{args: compatFormat("-q", "--type", "luks1", "--keyslot-cipher", "aes-xts-plain64", "--keyslot-key-size", "256", "NEW", "{key}"), stdout: true},
	{args: []string{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--keyslot-cipher", "aes-cbc-plain64", "--keyslot-key-size", "128", "-d", "{key}", "COPY", "{key}"}, stdout: true},
	{args: []string{"luksConvertKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--keyslot-cipher", "aes-xts-plain", "--keyslot-key-size", "1024", "-d", "{key}", "COPY"}, stdout: true},
	// Unit suffixes on the size options.
	{args: []string{"--test-args", "luksFormat", "--luks2-keyslots-size", "16m", "--luks2-metadata-size", "16k", "{img}"}, stdout: true},
	{args: []string{"--test-args", "luksFormat", "--luks2-metadata-size", "15x", "{img}"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--device-size", "32m", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "open", "--type", "plain", "--device-size", "513", "{img}", "n"}, stdout: true},
	// Every action cryptsetup knows is known.
	{args: []string{"refresh"}, stdout: true},
	{args: []string{"--test-args", "refresh", "n"}, stdout: true},
	{args: []string{"--test-args", "refresh", "--test-passphrase", "n"}, stdout: true},
	{args: []string{"--test-args", "refresh", "--label", "x", "n"}, stdout: true},
	{args: []string{"--test-args", "plainOpen", "--test-passphrase", "{img}", "n"}, stdout: true},
	{args: []string{"--test-args", "create", "n", "{img}", "--offset", "8", "--skip", "8"}, stdout: true},
	{args: []string{"--test-args", "luksSuspend", "-S", "0", "n"}, stdout: true},
	{args: []string{"--test-args", "luksResume", "-S", "0", "n"}, stdout: true},
	{args: []string{"--test-args", "luksConfig", "{img}"}, stdout: true},
	{args: []string{"--test-args", "remove", "n"}, stdout: true},
	// resize: its arguments, options and units.
	{args: []string{"resize"}, stdout: true},
	{args: []string{"--test-args", "resize", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "--device-size", "32m", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "--device-size", "1000", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "--device-size", "1m", "--size", "8", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "--allow-discards", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "-S", "1", "n"}, stdout: true},
	{args: []string{"--test-args", "resize", "--key-file", "k", "--disable-keyring", "--token-only", "n"}, stdout: true},
	// Not active (cryptsetup here cannot reach device-mapper at all).
	{args: []string{"resize", "luksd-compat-none"}, codeOnly: true},
}

// TestCLILikeCryptsetup runs command lines a script may type through both
// tools: exit code, the last line of stderr (cryptsetup prefixes some with
// "cryptsetup: ", so luksd's must be its tail), and stdout where asked.
func TestCLILikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	plain := testtool.ImageAt(t, w.dir, "plain.img", 1<<20)
	orig, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{img}", img, "{key}", key, "{plain}", plain)
	for i, c := range compatCases {
		compareCompat(t, w, i, c, orig, fill)
	}
}

// compareCompat runs case i through both tools, args filled in by fill
// and NEW, SMALL and COPY made per tool, and compares what they did.
func compareCompat(t *testing.T, w *workspace, i int, c compatCase, orig []byte, fill *strings.Replacer) {
	t.Helper()
	results := map[string]result{}
	made := map[string]string{}
	for _, tool := range []string{"cs", "luksd"} {
		args := append([]string(nil), c.args...)
		for j, a := range args {
			args[j] = fill.Replace(a)
			var p string
			switch a {
			case "NEW":
				p = testtool.ImageAt(t, w.dir, tool+"-new.img", 20<<20)
			case "SMALL":
				p = testtool.ImageAt(t, w.dir, tool+"-small.img", 1<<20)
			case "COPY":
				p = filepath.Join(w.dir, tool+"-copy.img")
				if err := os.WriteFile(p, orig, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				continue
			}
			args[j], made[tool] = p, p
		}
		if tool == "cs" {
			results[tool] = w.cs(nil, args...)
		} else {
			results[tool] = w.luksd(nil, args...)
		}
	}
	want, got := results["cs"], results["luksd"]
	name := strings.Join(c.args, " ")
	if got.code != want.code {
		t.Errorf("%d %q: luksd exit %d (%q), cryptsetup exit %d (%q)", i, name, got.code, lastLine(got.stderr), want.code, lastLine(want.stderr))
		return
	}
	if c.codeOnly {
		return
	}
	ws, gs := lastLine(want.stderr), lastLine(got.stderr)
	if (ws == "") != (gs == "") || !strings.HasSuffix(ws, gs) {
		t.Errorf("%d %q: luksd says %q, cryptsetup %q", i, name, gs, ws)
	}
	if c.stdout {
		a := strings.ReplaceAll(want.stdout, made["cs"], "IMG")
		b := strings.ReplaceAll(got.stdout, made["luksd"], "IMG")
		if a != b {
			t.Errorf("%d %q: stdout differs:\n--- cryptsetup\n%s--- luksd\n%s", i, name, a, b)
		}
	}
	if c.layout && want.code == 0 {
		a, b := layoutOf(t, w, made["cs"]), layoutOf(t, w, made["luksd"])
		if a != b {
			t.Errorf("%d %q: layouts differ:\n--- cryptsetup\n%s\n--- luksd\n%s", i, name, a, b)
		}
	}
}

var layoutLine = regexp.MustCompile(`(?m)^\s*(UUID|Metadata area|Keyslots area|offset|sector|length|cipher|Cipher|PBKDF|Iterations|AF hash|Hash):.*$`)

// layoutOf is what cryptsetup's luksDump says about where things are,
// with the file's size.
func layoutOf(t *testing.T, w *workspace, img string) string {
	t.Helper()
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	dump := w.cs(nil, "luksDump", img).ok(t).stdout
	return strings.Join(layoutLine.FindAllString(dump, -1), "\n") + "\nsize " + strconv.FormatInt(fi.Size(), 10)
}

// TestVersionAndHelpLikeCryptsetup: --version and -V print "NAME VERSION"
// and exit 0 wherever they stand, the first of --help/--version wins,
// --usage exits 0, and -h stays --hash.
func TestVersionAndHelpLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	shape := regexp.MustCompile(`^(cryptsetup|luksd) [0-9][^ \n]*( |\n)`)
	for _, args := range [][]string{
		{"--version"}, {"-V"}, {"-V", "-v"}, {"luksDump", "--version"}, {"frobnicate", "-V"},
		{"--version", "--help"}, {"-qV"},
	} {
		for tool, r := range map[string]result{"cryptsetup": w.cs(nil, args...), "luksd": w.luksd(nil, args...)} {
			if r.code != 0 || !shape.MatchString(r.stdout) || strings.Count(r.stdout, "\n") != 1 || r.stderr != "" {
				t.Errorf("%s %q: exit %d, stdout %q, stderr %q", tool, args, r.code, r.stdout, r.stderr)
			}
		}
	}
	// An unknown option before --version is reported first, as popt does.
	want, got := w.cs(nil, "--nosuch", "--version"), w.luksd(nil, "--nosuch", "--version")
	if got.code != want.code || !strings.HasSuffix(lastLine(want.stderr), lastLine(got.stderr)) {
		t.Errorf("--nosuch --version: luksd %d %q, cryptsetup %d %q", got.code, got.stderr, want.code, lastLine(want.stderr))
	}
	if r := w.luksd(nil, "version"); r.code != 0 || r.stdout != w.luksd(nil, "--version").stdout {
		t.Errorf("luksd version: exit %d, %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"--help"}, {"-?"}, {"luksDump", "--help"}, {"--help", "--version"}} {
		for tool, r := range map[string]result{"cryptsetup": w.cs(nil, args...), "luksd": w.luksd(nil, args...)} {
			// Both start with the version line, then the help.
			if r.code != 0 || !shape.MatchString(r.stdout) || strings.Count(r.stdout, "\n") < 5 {
				t.Errorf("%s %q: exit %d, stdout %q", tool, args, r.code, r.stdout)
			}
		}
	}
	if r := w.luksd(nil, "luksFormat", "--help"); !strings.Contains(r.stdout, "--align-payload") {
		t.Errorf("luksFormat --help does not show the verb's options: %q", r.stdout)
	}
	for tool, r := range map[string]result{"cryptsetup": w.cs(nil, "--usage"), "luksd": w.luksd(nil, "--usage")} {
		if r.code != 0 || !strings.HasPrefix(r.stderr, "Usage: ") {
			t.Errorf("%s --usage: exit %d, stderr %q", tool, r.code, r.stderr)
		}
	}
}

// TestFormatRefusesBusyDevice: luksFormat does not overwrite a block device
// something holds (a mount, a dm/md user), nor the image of an active
// luksd volume.
func TestFormatRefusesBusyDevice(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	pb := cheapPBKDF("pbkdf2")

	_, done := startFake(t, "fmtbusy")
	st, err := daemon.Active("fmtbusy")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	w.luksd(nil, append([]string{"luksFormat", "-q", st.Image, key}, pb...)...).expect(t, exitBusy, "Cannot use device "+st.Image+" which is in use (already mapped or mounted).")
	stopVolume(t, "fmtbusy", done)

	// A loop device held exclusively, as a mount holds it.
	if os.Geteuid() != 0 {
		t.Skip("SKIP (not a pass): loop devices need root")
	}
	losetup := testtool.Need(t, "losetup")
	img := w.image("loop.img")
	out, err := exec.Command(losetup, "-f", "--show", img).Output()
	if err != nil {
		t.Skipf("SKIP (not a pass): no loop device: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", loop).Run() })
	args := append([]string{"luksFormat", "-q", loop, key}, pb...)
	sameRefusal := func(what string) {
		t.Helper()
		want, got := w.cs(nil, args...), w.luksd(nil, args...)
		if want.code == 0 || got.code != want.code || lastLine(got.stderr) != lastLine(want.stderr) {
			t.Errorf("%s %s: luksd exit %d %q, cryptsetup exit %d %q", what, loop, got.code, got.stderr, want.code, want.stderr)
		}
	}
	hold, err := os.OpenFile(loop, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameRefusal("held")
	hold.Close()

	// Mounted.
	mkfs := testtool.Need(t, "mkfs.ext4")
	if out, err := exec.Command(mkfs, "-q", "-F", loop).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", loop, mnt).CombinedOutput(); err != nil {
		t.Skipf("SKIP (not a pass): cannot mount: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() }) // if a check below fails first
	sameRefusal("mounted")
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}

	// Released, it formats.
	w.luksd(nil, args...).ok(t)
	w.cs(nil, "isLuks", loop).ok(t)
}

// TestPeerImagesLikeCryptsetup runs isLuks, luksUUID and luksDump on
// cryptsetup's own test images, damaged headers included: the same exit
// codes, and the same dump where there is one.
func TestPeerImagesLikeCryptsetup(t *testing.T) {
	t.Parallel() // its own images only (see workspace)
	corpus := testtool.PeerCorpus(t)
	w := newWorkspace(t)
	xz, tar := testtool.Need(t, "xz"), testtool.Need(t, "tar")
	var images []string
	for _, name := range []string{"compatimage.img.xz", "luks2_valid_hdr.img.xz", "luks2_keyslot_unassigned.img.xz",
		"evil_hdr-keyslot_overlap.xz", "evil_hdr-luks_hdr_damage.xz", "evil_hdr-payload_overwrite.xz",
		"evil_hdr-small_luks_device.xz", "evil_hdr-stripes_payload_dmg.xz"} {
		dst := w.path(strings.TrimSuffix(name, ".xz"))
		out, err := exec.Command(xz, "-dc", filepath.Join(corpus, name)).Output()
		if err != nil {
			t.Fatalf("xz -dc %s: %v", name, err)
		}
		if err := os.WriteFile(dst, out, 0o600); err != nil {
			t.Fatal(err)
		}
		images = append(images, dst)
	}
	if out, err := exec.Command(tar, "-xJf", filepath.Join(corpus, "luks1-images.tar.xz"), "-C", w.dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	luks1, _ := filepath.Glob(filepath.Join(w.dir, "luks1-images", "luks1_*-sha256.img"))
	images = append(images, luks1...)
	for _, img := range images {
		for _, verb := range []string{"isLuks", "luksUUID", "luksDump"} {
			// Each tool its own copy: both repair what they load.
			want, got, _, _ := w.twinRun(img, verb, "IMG")
			if got.code != want.code || want.code == 0 && got.stdout != want.stdout {
				t.Errorf("%s %s: luksd exit %d %q, cryptsetup exit %d %q", verb, filepath.Base(img), got.code, lastLine(got.stderr), want.code, lastLine(want.stderr))
			}
		}
	}
}

// TestBenchmarkPBKDFLinesLikeCryptsetup: the PBKDF rows of benchmark read
// the same but for the measured iteration counts.
func TestBenchmarkPBKDFLinesLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	// Counts are right-aligned in a field: the padding varies with them.
	counts := regexp.MustCompile(`(?m)^(PBKDF2-\S+|argon2i\S*)\s+\d+`)
	for _, args := range [][]string{
		{"benchmark", "--pbkdf", "argon2id", "--pbkdf-memory", "32", "--iter-time", "100"},
		{"benchmark", "--pbkdf", "argon2i", "--pbkdf-memory", "64", "--pbkdf-parallel", "1", "-i", "100"},
		{"benchmark", "--pbkdf", "pbkdf2", "-h", "sha256"},
	} {
		want, got := w.cs(nil, args...), w.luksd(nil, args...)
		a, b := counts.ReplaceAllString(want.stdout, "$1 N"), counts.ReplaceAllString(got.stdout, "$1 N")
		if got.code != want.code || a != b || !strings.Contains(a, " N ") {
			t.Errorf("%q:\n--- cryptsetup (exit %d)\n%s--- luksd (exit %d)\n%s", args, want.code, a, got.code, b)
		}
	}
}

// An unknown --hash is refused by every command that makes a keyslot
// with cryptsetup's two lines and exit code, before a passphrase is
// read (standard input is empty), the volume unchanged.
func TestHashBogusLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	for _, args := range [][]string{
		{"luksAddKey", "-q", "-d", "{key}", "COPY", "{key}"},
		{"luksAddKey", "-q", "COPY"},
		{"luksAddKey", "-q", "-d", "{key}", "--pbkdf-force-iterations", "10", "COPY", "{key}"},
		{"luksChangeKey", "-q", "-d", "{key}", "COPY", "{key}"},
		{"luksConvertKey", "-q", "-d", "{key}", "COPY"},
		{"luksFormat", "-q", "COPY", "{key}"},
		{"luksFormat", "-q", "--type", "luks1", "COPY", "{key}"},
		{"luksFormat", "-q", "--pbkdf", "argon2id", "COPY", "{key}"},
	} {
		var res [2]result
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			cp := w.path(fmt.Sprintf("copy%d.img", i))
			copyFile(t, img, cp)
			line := []string{"--hash", "bogus"}
			for _, a := range args {
				line = append(line, strings.NewReplacer("{key}", key, "COPY", cp).Replace(a))
			}
			res[i] = runTool(t, []byte{}, tool, line...)
			if fileSum(t, cp) != fileSum(t, img) {
				t.Errorf("%v: tool %d changed the volume", args, i)
			}
		}
		if res[0].code != exitParams || res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
	}
}
