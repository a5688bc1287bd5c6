package main

import (
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestRefresh: refresh (open --refresh) asks for the key again and checks
// it against the running volume; --perf-* are accepted, a change of
// --allow-discards or --readonly is refused, not ignored.
func TestRefresh(t *testing.T) {
	_, pass := startLUKSVolume(t, "ref")
	wrong := testtool.KeyFile(t, []byte("not the passphrase"))
	luksd(t, nil, "refresh", "nothere").expect(t, exitDevice, "Device nothere is not active.")
	luksd(t, nil, "refresh", "--key-file", wrong, "ref").expect(t, exitPermission, "No key available with this passphrase.")
	luksd(t, nil, "refresh", "--key-file", pass, "--perf-no_read_workqueue", "ref").expect(t, 0, "")
	luksd(t, nil, "open", "--refresh", "--key-file", pass, "IGNORED", "ref").expect(t, 0, "")
	luksd(t, nil, "refresh", "--key-file", pass, "--allow-discards", "ref").expect(t, exitParams, "luksd cannot change --readonly or --allow-discards of an active volume; close and open ref again.")
	luksd(t, nil, "refresh", "--key-file", pass, "-r", "ref").expect(t, exitParams, "luksd cannot change")
	luksd(t, nil, "refresh", "--key-file", pass, "--label", "x", "ref").expect(t, exitParams, "Option --label is not allowed with open action.")
}
