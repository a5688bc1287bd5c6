package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// result is one run of a command.
type result struct {
	stdout, stderr string
	code           int
}

// toolDeadline bounds one run of a tool. A run that hangs gets SIGQUIT
// (a Go program prints its goroutines) and fails its test, rather than
// holding the whole suite until go test's timeout.
const toolDeadline = 5 * time.Minute

// runTool runs prog with args and stdin, and fails the test on a panic or
// stack trace, which luksd must never print.
func runTool(t *testing.T, stdin []byte, prog string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not end within %v; it printed:\n%s", filepath.Base(prog), args, toolDeadline, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", prog, args, err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("%s %v printed a stack trace:\n%s", filepath.Base(prog), args, r.stderr)
	}
	return r
}

// luksd runs the luksd binary.
func luksd(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return runTool(t, stdin, testtool.Luksd(t), args...)
}

// expect checks the exit code and that stderr holds want (one line).
func (r result) expect(t *testing.T, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, code, r.stderr)
	}
	if want != "" && !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q does not say %q", r.stderr, want)
	}
	if code != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("error is not one line: %q", r.stderr)
	}
}

func TestCLIErrorsAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	plain := testtool.ImageAt(t, dir, "plain.img", 1<<20)
	missing := filepath.Join(dir, "missing.img")
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("pw"), 0o600)

	luksd(t, nil, "luksDump", missing).expect(t, 4, "Device "+missing+" does not exist or access denied.")
	luksd(t, nil, "luksDump", plain).expect(t, 1, "Device "+plain+" is not a valid LUKS device.")
	luksd(t, nil, "luksAddKey", "-d", key, plain).expect(t, 1, "is not a valid LUKS device.")
	luksd(t, nil, "luksKillSlot", "-q", plain, "1").expect(t, 1, "is not a valid LUKS device.")
	luksd(t, nil, "luksKillSlot", "-q", plain, "x").expect(t, 1, "Key slot x is invalid.")
	luksd(t, nil, "luksUUID", "--uuid", "not-a-uuid", plain).expect(t, 1, "Wrong LUKS UUID format provided.")
	luksd(t, nil, "config", "--label", "x", missing).expect(t, 4, "does not exist")

	// Bad flags and arguments: exit 1, one line, no help page.
	r := luksd(t, nil, "luksDump", "--no-such-flag", plain)
	r.expect(t, 1, "no-such-flag")
	if r.stdout != "" {
		t.Fatalf("bad flag printed %q on stdout", r.stdout)
	}
	luksd(t, nil, "luksDump", "--key-slot", "x", plain).expect(t, 1, "invalid numeric value")
	luksd(t, nil, "luksDump").expect(t, 1, "luksDump: requires <device> as arguments")
	luksd(t, nil, "luksDump", plain, "extra").expect(t, 1, "Device "+plain+" is not a valid LUKS device.") // extra arguments are ignored
	luksd(t, nil, "isLuks", plain, "extra").expect(t, 4, "Only one device argument for isLuks operation is supported.")
	luksd(t, nil, "luksFormat", "-q", "--type", "luks1", "--sector-size", "4096", "-d", key, plain).expect(t, 1, "Unsupported encryption sector size.")
	luksd(t, nil, "luksFormat", "-q", "--type", "luks3", "-d", key, plain).expect(t, 1, "Unsupported device type luks3.")
	luksd(t, nil, "luksFormat", "-q", "--pbkdf", "scrypt", "-d", key, plain).expect(t, 1, "Password-based key derivation function (PBKDF) can be only pbkdf2 or argon2i/argon2id.")
	luksd(t, nil, "luksFormat", "-q", "--sector-size", "1000", "-d", key, plain).expect(t, 1, "Unsupported encryption sector size.")
	luksd(t, nil, "luksFormat", "-q", "-s", "100", "-d", key, plain).expect(t, 1, "multiple of 8 bits")
	luksd(t, nil, "luksFormat", "-q", "-d", key, missing).expect(t, 4, "does not exist")
	luksd(t, nil, "luksHeaderBackup", plain).expect(t, 1, "Option --header-backup-file is required.")

	luksd(t, nil, "frobnicate", plain).expect(t, 1, "Unknown action.")
	luksd(t, nil, "tcryptDump", plain).expect(t, 1, "Action tcryptDump is not supported by luksd.")
	// What luksd cannot do, --test-args says too (cryptsetup would pass these).
	luksd(t, nil, "--test-args", "open", "--type", "bitlk", "--test-passphrase", plain).expect(t, 1, "Device type bitlk is not supported by luksd")
	luksd(t, nil, "--test-args", "open", "--type", "loopaes", "--offset", "8", plain, "n").expect(t, 1, "Device type loopaes is not supported by luksd")
	luksd(t, nil, "--test-args", "open", "--type", "tcrypt", "--veracrypt", plain, "n").expect(t, 1, "Option --veracrypt is not supported by luksd.")
	luksd(t, nil, "--test-args", "luksFormat", "--integrity", "hmac-sha256", plain).expect(t, 1, "Option --integrity is not supported by luksd.")
	luksd(t, nil, "--test-args", "reencrypt", "--device-size", "32m", plain).expect(t, 0, "")
	luksd(t, nil, "help").expect(t, 1, "Unknown action.") // as cryptsetup help
	luksd(t, nil).expect(t, 1, "Argument <action> missing.")

	// isLuks: 1 quietly; -v adds cryptsetup's status line only.
	r = luksd(t, nil, "isLuks", plain)
	r.expect(t, 1, "")
	if r.stderr != "" {
		t.Fatalf("isLuks without -v printed %q", r.stderr)
	}
	r = luksd(t, nil, "isLuks", "-v", plain)
	r.expect(t, 1, "")
	if r.stdout != "Command failed with code -1 (wrong or missing parameters).\n" || r.stderr != "" {
		t.Fatalf("isLuks -v stdout %q, stderr %q", r.stdout, r.stderr)
	}
	luksd(t, nil, "isLuks", missing).expect(t, 4, "does not exist")
}

func TestOptionsAnywhere(t *testing.T) {
	dir := t.TempDir()
	plain := testtool.ImageAt(t, dir, "plain.img", 1<<20)
	backup := filepath.Join(dir, "hdr")
	// The option is seen before the verb and after the device alike:
	// both runs get as far as checking the device, not the option.
	for _, args := range [][]string{
		{"--header-backup-file", backup, "luksHeaderBackup", plain},
		{"luksHeaderBackup", plain, "--header-backup-file", backup},
		{"luksHeaderBackup", "--header-backup-file=" + backup, plain},
		{"-v", "luksHeaderBackup", plain, "--header-backup-file", backup},
	} {
		luksd(t, nil, args...).expect(t, 1, "Device "+plain+" is not a valid LUKS device.")
	}
	luksd(t, nil, "luksHeaderBackup", plain).expect(t, 1, "Option --header-backup-file is required.")
}

func TestPoptReordersEveryVerb(t *testing.T) {
	app := newApp()
	cases := []struct{ in, want []string }{
		{[]string{"-q", "luksKillSlot", "img", "1", "-d", "k"},
			[]string{"luksKillSlot", "--batch-mode", "--key-file=k", "--", "img", "1"}},
		{[]string{"luksAddKey", "img", "new", "--key-file", "-", "-S", "4"},
			[]string{"luksAddKey", "--key-file=-", "--key-slot=4", "--", "img", "new"}},
		{[]string{"--header-backup-file", "f", "luksHeaderRestore", "img"},
			[]string{"luksHeaderRestore", "--header-backup-file=f", "--", "img"}},
		{[]string{"luksFormat", "--cipher=aes-cbc-essiv:sha256", "img", "-s", "256", "key"},
			[]string{"luksFormat", "--cipher=aes-cbc-essiv:sha256", "--key-size=256", "--", "img", "key"}},
		{[]string{"luksDump", "--dump-volume-key", "img", "-d", "-"},
			[]string{"luksDump", "--dump-volume-key", "--key-file=-", "--", "img"}},
		{[]string{"luksUUID", "img", "--uuid", "u"}, []string{"luksUUID", "--uuid=u", "--", "img"}},
		{[]string{"config", "img", "--label", "l"}, []string{"config", "--label=l", "--", "img"}},
		// popt's attached short values and clusters.
		{[]string{"luksDump", "img", "-S5", "-qv"}, []string{"luksDump", "--key-slot=5", "--batch-mode", "--verbose", "--", "img"}},
		{[]string{"-l32", "luksDump", "-d-", "img"}, []string{"luksDump", "--keyfile-size=32", "--key-file=-", "--", "img"}},
		{[]string{"luksDump", "-qS=3", "img"}, []string{"luksDump", "--batch-mode", "--key-slot=3", "--", "img"}},
		// A value option takes the next argument whatever it looks like.
		{[]string{"luksDump", "-d", "-q", "img"}, []string{"luksDump", "--key-file=-q", "--", "img"}},
		// Old names, and cryptsetup options the verb ignores.
		{[]string{"luksOpen", "img", "n", "--disable-locks", "--use-directio", "-c", "aes"}, []string{"luksOpen", "--disable-locks", "--cipher=aes", "--", "img", "n"}},
		// open defines --perf-* (--persistent stores them); luksDump ignores them.
		{[]string{"luksOpen", "img", "n", "--perf-same_cpu_crypt"}, []string{"luksOpen", "--perf-same_cpu_crypt", "--", "img", "n"}},
		{[]string{"luksDump", "img", "--perf-same_cpu_crypt"}, []string{"luksDump", "--", "img"}},
		{[]string{"luksDump", "--dump-master-key", "--master-key-file", "f", "img"},
			[]string{"luksDump", "--dump-volume-key", "--volume-key-file=f", "--", "img"}},
		{[]string{"luksUUID", "-d", "key", "--timeout", "5", "img"}, []string{"luksUUID", "--", "img"}},
		// Everything after -- is positional.
		{[]string{"luksDump", "--", "-img"}, []string{"luksDump", "--", "-img"}},
	}
	for _, c := range cases {
		line, err := popt(app, append([]string{"luksd"}, c.in...))
		if err != nil {
			t.Errorf("popt(%q): %v", c.in, err)
			continue
		}
		if got := line.args[1:]; strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("popt(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCombinedShortOptions(t *testing.T) {
	plain := testtool.ImageAt(t, t.TempDir(), "plain.img", 1<<20)
	r := luksd(t, nil, "isLuks", "-qv", plain)
	r.expect(t, 1, "")
	if !strings.Contains(r.stdout, "Command failed with code -1") {
		t.Fatalf("-qv did not set -v: %q", r.stdout)
	}
	luksd(t, nil, "luksDump", plain, "--header").expect(t, 1, "--header: missing argument")
}
