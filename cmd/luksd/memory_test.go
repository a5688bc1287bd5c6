package main

import (
	"os"
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
	// 1.4 GB of address space: enough for Go's runtime (it reserves
	// about 0.8 GB at start, more for a larger binary: 1.3 GB no longer
	// starts one with the S3 client in it), not for it and the keyslot's
	// 1 GiB.
	runTool(t, nil, prlimit, "--as=1400000000", testtool.Luksd(t), "open", "--test-passphrase", "--key-file", key, img).
		expect(t, exitMemory, "Not enough available memory to open a keyslot.")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, img).expect(t, 0, "")
}
