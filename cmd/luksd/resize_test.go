package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/daemon/daemontest"
	"github.com/luksd/luksd/internal/testtool"
)

// startResizeVolume runs a daemon for name (fake frontend) over a 20 MiB
// LUKS2 image cryptsetup formatted, and returns the fake frontend and the
// image and its passphrase file; the volume is closed when the test ends.
func startResizeVolume(t *testing.T, name string) (fe *daemontest.Fake, img, pass string) {
	t.Helper()
	return startResizeVolumeEdited(t, name, nil)
}

// startResizeVolumeEdited is startResizeVolume with the header's JSON
// edited first (rewriteJSON), when edit is not nil.
func startResizeVolumeEdited(t *testing.T, name string, edit func(js string) string) (fe *daemontest.Fake, img, pass string) {
	t.Helper()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	cs, img, pass := claimFixture(t)
	if edit != nil {
		rewriteJSON(t, img, edit)
	}
	captureLog(t)
	fe = fakeFrontend()
	dump := runTool(t, nil, cs, "luksDump", "--dump-volume-key", "-q", "--key-file", pass, img)
	v := imageVolume(t, img, img, testtool.VolumeKey(t, dump.stdout))
	done := startDaemon(t, v.spec(name, daemon.Options{Frontend: fe.Name()}), v.Key)
	t.Cleanup(func() { closeVolume(name); waitDaemon(t, done) })
	return fe, img, pass
}

// statusSectors is the "size:" line of luksd status NAME.
func statusSectors(t *testing.T, name string) int64 {
	t.Helper()
	r := luksd(t, nil, "status", name)
	for _, l := range strings.Split(r.stdout, "\n") {
		var n int64
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "size: %d sectors", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no size in status:\n%s", r.stdout)
	return 0
}

// TestResizeFollowsImage: after the image file grows, resize without a
// size takes all of it (the kernel side and status are told, the new end
// reads and writes); --device-size shrinks and grows within it; a size
// past the device, one that is not whole sectors and an image shrunk
// below the data offset are refused in cryptsetup's words, exit 1, and
// change nothing.
func TestResizeFollowsImage(t *testing.T) {
	fe, img, _ := startResizeVolume(t, "rz")
	const data = 4 << 20 // 20 MiB image, 16 MiB data offset
	if got := statusSectors(t, "rz"); got != data/512 {
		t.Fatalf("status size %d sectors, want %d", got, data/512)
	}
	luksd(t, nil, "resize", "rz").expect(t, 0, "") // already that size
	if s := fe.Last().Sizes(); len(s) != 0 {
		t.Fatalf("the kernel side was resized to %v for no change", s)
	}

	if err := os.Truncate(img, 28<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "resize", "rz").expect(t, 0, "")
	dev := fe.Last().Dev
	if got := statusSectors(t, "rz"); got != 12<<20/512 || dev.Size() != 12<<20 {
		t.Fatalf("after growing: status %d sectors, device %d bytes; want 12 MiB", got, dev.Size())
	}
	end := bytes.Repeat([]byte("new end."), 512)
	if _, err := dev.WriteAt(end, 12<<20-4096); err != nil {
		t.Fatalf("writing the grown end: %v", err)
	}
	got := make([]byte, len(end))
	if _, err := dev.ReadAt(got, 12<<20-4096); err != nil || !bytes.Equal(got, end) {
		t.Fatalf("reading the grown end back: %v", err)
	}

	luksd(t, nil, "resize", "--device-size", "8m", "rz").expect(t, 0, "")
	luksd(t, nil, "resize", "-b", "20480", "rz").expect(t, 0, "") // 10 MiB
	if got := statusSectors(t, "rz"); got != 20480 {
		t.Fatalf("status %d sectors after --size 20480", got)
	}
	if want := []int64{12 << 20, 8 << 20, 10 << 20}; !slices.Equal(fe.Last().Sizes(), want) {
		t.Fatalf("the kernel side was told %v, want %v", fe.Last().Sizes(), want)
	}

	luksd(t, nil, "resize", "--device-size", "13m", "rz").expect(t, exitParams, "Device "+img+" is too small.")
	luksd(t, nil, "resize", "--size", "20481", "rz").expect(t, exitParams, "Device size is not aligned to requested sector size.")
	if err := os.Truncate(img, 15<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "resize", "rz").expect(t, exitParams, "Requested offset is beyond real size of device "+img+".")
	if got := statusSectors(t, "rz"); got != 20480 || dev.Size() != 10<<20 {
		t.Fatalf("a refused resize changed the size: status %d sectors, device %d bytes", got, dev.Size())
	}
	if err := os.Truncate(img, 28<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "resize", "nothere").expect(t, exitDevice, "Device nothere is not active.")
}

// TestResizeKernelRefusal: when the kernel device refuses the new size,
// the volume keeps its old one everywhere and resize fails in one line.
func TestResizeKernelRefusal(t *testing.T) {
	fe, img, _ := startResizeVolume(t, "rzk")
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	fe.Last().FailResize(errors.New("nbd: the kernel refused resize of /dev/nbd9"))
	luksd(t, nil, "resize", "rzk").expect(t, exitParams, "the kernel refused resize")
	if got, dev := statusSectors(t, "rzk"), fe.Last().Dev; got != 4<<20/512 || dev.Size() != 4<<20 {
		t.Fatalf("after a refused resize: status %d sectors, device %d bytes; want 4 MiB", got, dev.Size())
	}
}

// TestResizeWhileSuspended: a suspended volume is not resized.
func TestResizeWhileSuspended(t *testing.T) {
	fe, img, pass := startResizeVolume(t, "rzs")
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "luksSuspend", "rzs").expect(t, 0, "")
	luksd(t, nil, "resize", "rzs").expect(t, exitParams, "Volume rzs is suspended.")
	if s := fe.Last().Sizes(); len(s) != 0 {
		t.Fatalf("a suspended volume was resized to %v", s)
	}
	luksd(t, nil, "luksResume", "--key-file", pass, "rzs").expect(t, 0, "")
	luksd(t, nil, "resize", "rzs").expect(t, 0, "")
	if s := fe.Last().Sizes(); !slices.Equal(s, []int64{8 << 20}) {
		t.Fatalf("after resume the kernel side was told %v, want 8 MiB", s)
	}
}

// TestResizeStaticSize: a LUKS2 data segment of fixed size is mapped at
// that size, not to the end of the device; resize refuses it as
// cryptsetup does since 2.7 ("Can not resize LUKS2 device with static
// size.": 2.6.1 has a FIXME there and resizes), and refresh keeps the
// size.
func TestResizeStaticSize(t *testing.T) {
	const static = 2 << 20
	_, img, pass := startResizeVolumeEdited(t, "rzst", func(js string) string {
		return strings.Replace(js, `"size":"dynamic"`, fmt.Sprintf(`"size":"%d"`, static), 1)
	})
	if got := statusSectors(t, "rzst"); got != static/512 {
		t.Fatalf("status size %d sectors, want the static %d", got, static/512)
	}
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	luksd(t, nil, "resize", "rzst").expect(t, exitParams, "Can not resize LUKS2 device with static size.")
	luksd(t, nil, "resize", "--size", "100", "rzst").expect(t, exitParams, "Can not resize LUKS2 device with static size.")
	luksd(t, nil, "refresh", "--key-file", pass, "rzst").expect(t, 0, "")
	if got := statusSectors(t, "rzst"); got != static/512 {
		t.Fatalf("after resize and refresh: %d sectors, want the static %d", got, static/512)
	}
}
