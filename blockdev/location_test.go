package blockdev_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

func TestScheme(t *testing.T) {
	for loc, want := range map[string]string{
		"s3://bucket/vol":                 "s3",
		"nbd://127.0.0.1:10809/export":    "nbd",
		"nbd+unix:///export?socket=/x":    "nbd+unix",
		"/srv/vol.img":                    "",
		"vol.img":                         "",
		"./s3://x":                        "",
		"dir:with:colons/vol.img":         "",
		"1s3://bucket":                    "",
		"://nothing":                      "",
		"s3:/one-slash":                   "",
		"/dev/disk/by-id/usb-x:0":         "",
		"C:\\windows\\is\\not\\a\\scheme": "",
	} {
		if got := blockdev.Scheme(loc); got != want {
			t.Errorf("Scheme(%q) = %q, want %q", loc, got, want)
		}
	}
}

// A URL nobody registered is refused in one line, as a header edit's path
// is; a registered scheme's device comes back behind the Tracked layer.
func TestOpenByLocation(t *testing.T) {
	_, err := blockdev.Open("s3://bucket/vol", blockdev.OpenOptions{})
	if !errors.Is(err, blockdev.ErrUnknownScheme) || err.Error() != "unknown location scheme s3 (s3://bucket/vol)" {
		t.Fatalf("Open of an unknown scheme: %v", err)
	}
	if _, _, err := blockdev.OpenPath("s3://bucket/vol", false); !errors.Is(err, blockdev.ErrUnknownScheme) {
		t.Fatalf("OpenPath of an unknown scheme: %v", err)
	}

	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	var got string
	blockdev.Register("memtest", func(loc string, opts blockdev.OpenOptions) (blockdev.Device, error) {
		got = loc
		return faulty, nil
	})
	b, err := blockdev.Open("memtest://one", blockdev.OpenOptions{})
	if err != nil || got != "memtest://one" {
		t.Fatalf("Open of a registered scheme: %v (the backend saw %q)", err, got)
	}
	defer b.Close()
	if b.Claim() != "" {
		t.Errorf("claim %q of a backend that claims nothing", b.Claim())
	}
	if _, err := b.WriteAt([]byte("tracked"), 4096); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultFlush, 0, 0)
	b.Flush()
	faulty.Heal()
	if err := b.Flush(); !errors.Is(err, blockdev.ErrLostWrites) {
		t.Fatalf("flush after a lost write: %v, want ErrLostWrites (the backend is tracked)", err)
	}

	defer func() {
		if recover() == nil {
			t.Error("a second Register of a scheme did not panic")
		}
	}()
	blockdev.Register("memtest", nil)
}

// A local path must be a regular file or a block device; a FIFO is refused
// before it is opened (opening it would block).
func TestOpenPathKinds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir, "/dev/null"} {
		if _, _, err := blockdev.OpenPath(p, false); !errors.Is(err, blockdev.ErrNotDevice) {
			t.Errorf("OpenPath(%s): %v, want ErrNotDevice", p, err)
		}
		if _, err := blockdev.Open(p, blockdev.OpenOptions{ReadOnly: true}); !errors.Is(err, blockdev.ErrNotDevice) {
			t.Errorf("Open(%s): %v, want ErrNotDevice", p, err)
		}
	}
	if _, _, err := blockdev.OpenPath(filepath.Join(dir, "missing"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenPath of a missing file: %v", err)
	}
	img := filepath.Join(dir, "img")
	if err := os.WriteFile(img, make([]byte, 12345), 0o600); err != nil {
		t.Fatal(err)
	}
	f, size, err := blockdev.OpenPath(img, true)
	if err != nil || size != 12345 {
		t.Fatalf("OpenPath of an image: size %d, %v", size, err)
	}
	f.Close()
}
