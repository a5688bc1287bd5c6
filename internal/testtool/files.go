package testtool

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Image creates a sparse file of size bytes in a fresh temporary folder
// and returns its path.
func Image(t testing.TB, size int64) string {
	t.Helper()
	return ImageAt(t, t.TempDir(), "disk.img", size)
}

// ImageAt creates (or truncates) the sparse file dir/name of size bytes
// and returns its path.
func ImageAt(t testing.TB, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// KeyFile writes secret into a fresh file (mode 0600) for --key-file, as
// secrets never go in argv, and returns its path.
func KeyFile(t testing.TB, secret []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mkDump finds the volume key in `luksDump --dump-volume-key` output
// (cryptsetup 2.6 says "MK dump:", later versions "Key:").
var mkDump = regexp.MustCompile(`(?s)(?:MK dump|Key):\s*((?:[0-9a-f]{2}\s+)+)`)

// VolumeKey returns the volume key printed by `luksDump --dump-volume-key`
// (cryptsetup's or luksd's), or fails the test.
func VolumeKey(t testing.TB, dump string) []byte {
	t.Helper()
	m := mkDump.FindStringSubmatch(dump)
	if m == nil {
		t.Fatalf("no volume key in luksDump output:\n%s", dump)
	}
	vk, err := hex.DecodeString(strings.Join(strings.Fields(m[1]), ""))
	if err != nil {
		t.Fatalf("bad volume key dump %q: %v", m[1], err)
	}
	return vk
}
