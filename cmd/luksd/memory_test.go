package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestArgon2OutOfMemory: a keyslot whose argon2 memory the process cannot
// have is cryptsetup's "Not enough available memory to open a keyslot."
// (exit 3), not a wrong passphrase and not a crash.
func TestArgon2OutOfMemory(t *testing.T) {
	cs := testtool.Need(t, "cryptsetup")
	prlimit := testtool.Need(t, "prlimit")
	dir := t.TempDir()
	img := testtool.ImageAt(t, dir, "img", 20<<20)
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("memory"), 0o600); err != nil {
		t.Fatal(err)
	}
	runTool(t, nil, cs, "luksFormat", "-q", "--type", "luks2", "--pbkdf", "argon2id",
		"--pbkdf-force-iterations", "4", "--pbkdf-memory", "1048576", "--key-file", key, img).expect(t, 0, "")
	// Enough address space for luksd to unlock a PBKDF2 keyslot, plus
	// 768 MB: not enough for the keyslot's 1 GiB, and far above what the
	// runtime's start varies by (below). Measured, not a constant: what
	// Go's runtime reserves grows with the program.
	cheap := testtool.ImageAt(t, dir, "cheap", 20<<20)
	runTool(t, nil, cs, "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, cheap).expect(t, 0, "")
	limit := addressSpaceToUnlock(t, prlimit, key, cheap, 500e6, 4e9, 100e6) + 768e6
	// Go 1.26's runtime puts its heap at a random address, and the
	// address space its start-up reserves varies with it: under a limit
	// near what luksd needs, a run now and then dies before main, in a
	// package's init or in the runtime's own start (measured with one
	// binary: 4 of 20 runs lived at 1.312 GB, 20 of 20 at 1.337, 19 of 20
	// at 1.362). Such a run says nothing about luksd: it is tried again 25
	// MB higher (the keyslot needs 1 GiB more than the probe, so still too
	// little); any other run is judged. A fatal error whose trace is in
	// luksd's unlock (luks2, argon2) is judged: that is the crash this
	// test is for. (One such death came in main, with 4 MB in use.)
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(prlimit, fmt.Sprintf("--as=%d", limit), testtool.Luksd(t), "open", "--test-passphrase", "--key-file", key, img)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		msg := stderr.String()
		diedAtStart := strings.Contains(msg, "fatal error:") && !strings.Contains(msg, "github.com/luksd/luksd/luks2") &&
			!strings.Contains(msg, "github.com/luksd/luksd/argon2")
		if diedAtStart && attempt < 10 {
			t.Logf("under --as=%d the Go runtime ran out of address space before main; again", limit)
			limit += 25e6
			continue
		}
		if code := cmd.ProcessState.ExitCode(); code != exitMemory || strings.TrimSpace(stderr.String()) != "Not enough available memory to open a keyslot." {
			t.Fatalf("under --as=%d: exit %d, %q; want exit %d and cryptsetup's one line", limit, code, stderr.String(), exitMemory)
		}
		break
	}
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, img).expect(t, 0, "")
}

// addressSpaceToUnlock returns the smallest address-space limit, from lo
// to hi in steps of step bytes, under which luksd unlocks img's cheap
// keyslot.
func addressSpaceToUnlock(t *testing.T, prlimit, key, img string, lo, hi, step int64) int64 {
	t.Helper()
	for limit := lo; limit <= hi; limit += step {
		cmd := exec.Command(prlimit, fmt.Sprintf("--as=%d", limit), testtool.Luksd(t), "open", "--test-passphrase", "--key-file", key, img)
		if cmd.Run() == nil {
			t.Logf("luksd unlocks a PBKDF2 keyslot within %d bytes of address space", limit)
			return limit
		}
	}
	t.Fatalf("luksd never unlocked a PBKDF2 keyslot under prlimit --as, from %d to %d bytes", lo, hi)
	return 0
}
