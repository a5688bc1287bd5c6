package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// half a gigabyte: not enough for the keyslot's 1 GiB. Measured, not
	// a constant: what Go's runtime reserves grows with the program.
	cheap := testtool.ImageAt(t, dir, "cheap", 20<<20)
	runTool(t, nil, cs, "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, cheap).expect(t, 0, "")
	limit := addressSpaceToUnlock(t, prlimit, key, cheap) + 512e6
	runTool(t, nil, prlimit, fmt.Sprintf("--as=%d", limit), testtool.Luksd(t), "open", "--test-passphrase", "--key-file", key, img).
		expect(t, exitMemory, "Not enough available memory to open a keyslot.")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, img).expect(t, 0, "")
}

// addressSpaceToUnlock returns the smallest address-space limit, in steps
// of 100 MB, under which luksd unlocks img's cheap keyslot.
func addressSpaceToUnlock(t *testing.T, prlimit, key, img string) int64 {
	t.Helper()
	for limit := int64(500e6); limit <= 4e9; limit += 100e6 {
		cmd := exec.Command(prlimit, fmt.Sprintf("--as=%d", limit), testtool.Luksd(t), "open", "--test-passphrase", "--key-file", key, img)
		if cmd.Run() == nil {
			t.Logf("luksd unlocks a PBKDF2 keyslot within %d bytes of address space", limit)
			return limit
		}
	}
	t.Fatal("luksd never unlocked a PBKDF2 keyslot under prlimit --as, up to 4 GB")
	return 0
}
