package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestResolveDevice: UUID= and LABEL= find a loop device holding a LUKS2
// header made by cryptsetup (no /dev/disk links here: the header search),
// in any case for the UUID; anything else is passed through as given.
func TestResolveDevice(t *testing.T) {
	for _, spec := range []string{"vol.img", "/dev/sdb", "UUID=", "UUID=zz-not-hex", "LABEL=a/b", "PARTUUID=1"} {
		if got := resolveDevice(spec); got != spec {
			t.Errorf("resolveDevice(%q) = %q, want it unchanged", spec, got)
		}
	}
	if got := resolveDevice("UUID=0DEAD000-0000-4000-8000-000000000000"); got != "/dev/disk/by-uuid/0dead000-0000-4000-8000-000000000000" {
		t.Errorf("unknown UUID resolved to %q", got)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP (not a pass): loop devices need root")
	}
	losetup := testtool.Need(t, "losetup")
	img := testtool.Image(t, 20<<20)
	key := testtool.KeyFile(t, []byte("pass"))
	const uuid = "0a1b2c3d-0000-4000-8000-00000000abcd"
	testtool.CryptsetupFormat(t, img, key, "--uuid", uuid, "--label", "nas-disk-7")
	out, err := exec.Command(losetup, "-f", "--show", img).Output()
	if err != nil {
		t.Skipf("SKIP (not a pass): no loop device: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", loop).Run() })
	for _, spec := range []string{"UUID=" + uuid, "UUID=" + strings.ToUpper(uuid), "LABEL=nas-disk-7"} {
		if got := resolveDevice(spec); got != loop {
			t.Errorf("resolveDevice(%q) = %q, want %s", spec, got, loop)
		}
	}
}

// TestOpenMappingOption: --mapping takes dm, symlink or auto; anything
// else is one line and exit 1, before any passphrase is asked for.
func TestOpenMappingOption(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	img := testtool.Image(t, 20<<20)
	luksd(t, nil, "open", "--mapping", "linear", img, "m").expect(t, exitParams, "Unknown --mapping linear (dm, symlink or auto).")
}
