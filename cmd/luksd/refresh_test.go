package main

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/testtool"
)

// TestRefresh: refresh (open --refresh) asks for the key again and checks
// it against the running volume; --perf-* are accepted; --allow-discards
// turns discards on in the running volume (crypt layer, kernel side and
// status) and a refresh without it turns them off again, as dm-crypt's
// reload does; --readonly changes nothing, as cryptsetup keeps the active
// mapping's read-only flag.
func TestRefresh(t *testing.T) {
	fe, _, pass := startResizeVolume(t, "ref")
	dev := fe.Last().Dev
	trim := func() error { return dev.(blockdev.Trimmer).Trim(0, 1<<20) }
	wrong := testtool.KeyFile(t, []byte("not the passphrase"))
	luksd(t, nil, "refresh", "nothere").expect(t, exitDevice, "Device nothere is not active.")
	luksd(t, nil, "refresh", "--key-file", wrong, "ref").expect(t, exitPermission, "No key available with this passphrase.")
	luksd(t, nil, "refresh", "--key-file", pass, "--perf-no_read_workqueue", "ref").expect(t, 0, "")
	luksd(t, nil, "open", "--refresh", "--key-file", pass, "IGNORED", "ref").expect(t, 0, "")
	if err := trim(); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("a discard before refresh --allow-discards: %v", err)
	}

	luksd(t, nil, "refresh", "--key-file", wrong, "--allow-discards", "ref").expect(t, exitPermission, "No key available")
	if len(fe.Last().Discards()) != 0 {
		t.Fatal("a refresh with a wrong passphrase changed discards")
	}
	luksd(t, nil, "refresh", "--key-file", pass, "--allow-discards", "ref").expect(t, 0, "")
	if r := luksd(t, nil, "status", "ref"); !strings.Contains(r.stdout, "  flags:   discards \n") {
		t.Fatalf("status after refresh --allow-discards:\n%s", r.stdout)
	}
	if err := trim(); err != nil {
		t.Fatalf("a discard after refresh --allow-discards: %v", err)
	}
	luksd(t, nil, "refresh", "--key-file", pass, "--allow-discards", "ref").expect(t, 0, "") // no change

	luksd(t, nil, "refresh", "--key-file", pass, "-r", "ref").expect(t, 0, "")
	r := luksd(t, nil, "status", "ref")
	if strings.Contains(r.stdout, "discards") || !strings.Contains(r.stdout, "  mode:    read/write\n") {
		t.Fatalf("status after refresh -r:\n%s", r.stdout)
	}
	if err := trim(); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("a discard after refresh without --allow-discards: %v", err)
	}
	if got := fe.Last().Discards(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("the kernel side was told discards %v, want on then off", got)
	}
	luksd(t, nil, "refresh", "--key-file", pass, "--label", "x", "ref").expect(t, exitParams, "Option --label is not allowed with open action.")
}

// TestRefreshPersistent: refresh --persistent stores the line's activation
// flags in the header (cryptsetup's luksDump shows them, in its order) and
// one without flags clears them, as cryptsetup 2.6.1's refresh does; the
// running volume takes the discard setting as without --persistent.
func TestRefreshPersistent(t *testing.T) {
	_, img, pass := startResizeVolume(t, "per")
	flagsLine := func() string {
		t.Helper()
		for _, l := range strings.Split(runTool(t, nil, "cryptsetup", "luksDump", img).stdout, "\n") {
			if strings.HasPrefix(l, "Flags:") {
				return l
			}
		}
		t.Fatal("no Flags line in cryptsetup's dump")
		return ""
	}
	luksd(t, nil, "refresh", "--persistent", "--key-file", pass, "--perf-no_write_workqueue", "--allow-discards", "per").expect(t, 0, "")
	if got, want := flagsLine(), "Flags:       \tallow-discards no-write-workqueue "; got != want {
		t.Fatalf("after refresh --persistent: %q, want %q", got, want)
	}
	if r := luksd(t, nil, "status", "per"); !strings.Contains(r.stdout, "  flags:   discards \n") {
		t.Fatalf("status after refresh --persistent --allow-discards:\n%s", r.stdout)
	}
	luksd(t, nil, "refresh", "--key-file", pass, "per").expect(t, 0, "") // the header's flag keeps discards on
	if r := luksd(t, nil, "status", "per"); !strings.Contains(r.stdout, "  flags:   discards \n") {
		t.Fatalf("status after a refresh that reads the persistent flag:\n%s", r.stdout)
	}
	luksd(t, nil, "refresh", "--persistent", "--key-file", pass, "per").expect(t, 0, "")
	if got, want := flagsLine(), "Flags:       \t(no flags)"; got != want {
		t.Fatalf("after refresh --persistent without flags: %q, want %q", got, want)
	}
}

// TestRefreshFollowsImage: refresh measures the device again, as
// dm-crypt's reload does (device_block_adjust on the new table): after
// the image grew, the volume takes it (the kernel side and status are
// told), and a wrong passphrase changes nothing.
func TestRefreshFollowsImage(t *testing.T) {
	fe, img, pass := startResizeVolume(t, "refg")
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	wrong := testtool.KeyFile(t, []byte("not the passphrase"))
	luksd(t, nil, "refresh", "--key-file", wrong, "refg").expect(t, exitPermission, "No key available")
	if got := statusSectors(t, "refg"); got != 4<<20/512 {
		t.Fatalf("a refused refresh resized to %d sectors", got)
	}
	luksd(t, nil, "refresh", "--key-file", pass, "refg").expect(t, 0, "")
	if got, dev := statusSectors(t, "refg"), fe.Last().Dev; got != 8<<20/512 || dev.Size() != 8<<20 {
		t.Fatalf("after refresh: status %d sectors, device %d bytes; want 8 MiB", got, dev.Size())
	}
	if s := fe.Last().Sizes(); len(s) != 1 || s[0] != 8<<20 {
		t.Fatalf("the kernel side was told sizes %v, want [8 MiB]", s)
	}
}
