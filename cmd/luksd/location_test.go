package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/luks2"
)

// Whatever blockdev.Open hands out can hold a header, barriers included:
// luks2's edits call the device's Flush (fdatasync, for a File) between
// key material, the primary copy and the secondary, through the
// interface, never by asking an arbitrary value for a Sync method.
var _ luks2.Device = blockdev.Backend(nil)

// TestUnknownLocationScheme: a location that is a URL of a scheme no
// backend takes is one line and exit 4 for every verb, the data device of
// a detached header too, before any passphrase is asked for.
func TestUnknownLocationScheme(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("passphrase"), 0o600)
	const loc = "ftp://bucket/vol.img"
	const want = "luksd: unknown location scheme ftp (" + loc + ")"
	for _, args := range [][]string{
		{"luksDump", loc},
		{"isLuks", loc},
		{"luksFormat", "-q", "--key-file", key, loc},
		{"luksAddKey", "--key-file", key, loc, key},
		{"open", "--key-file", key, loc, "v"},
		{"open", "--test-passphrase", "--key-file", key, loc},
		{"serve", "--key-file", key, loc},
	} {
		r := luksd(t, nil, args...)
		if args[0] == "isLuks" {
			// isLuks says nothing but its exit code, as for a missing
			// device.
			r.expect(t, exitDevice, "")
			continue
		}
		r.expect(t, exitDevice, want)
	}

	hdr := filepath.Join(dir, "hdr")
	luksd(t, nil, "luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--header", hdr, "--key-file", key, testtool.ImageAt(t, dir, "data", 1<<20)).expect(t, 0, "")
	luksd(t, nil, "open", "--test-passphrase", "--header", hdr, "--key-file", key, "iscsi://127.0.0.1/export").
		expect(t, exitDevice, "luksd: unknown location scheme iscsi (iscsi://127.0.0.1/export)")
}
