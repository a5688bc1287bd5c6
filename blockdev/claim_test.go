package blockdev

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// loopDevice attaches a loop device to image for the test's duration.
func loopDevice(t *testing.T, image string) string {
	t.Helper()
	losetup := testtool.Need(t, "losetup")
	if os.Geteuid() != 0 {
		testtool.Missing(t, "loop devices need root")
	}
	out, err := exec.Command(losetup, "-f", "--show", image).CombinedOutput()
	if err != nil {
		testtool.Missing(t, "no loop device: "+strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", dev).Run() })
	return dev
}

// A block device is claimed with O_EXCL: a second claim fails, as mkfs or
// mount would; a file with a loop device over it is refused; a loop
// device whose backing file is claimed is refused.
func TestClaimLoopDevice(t *testing.T) {
	img := testtool.Image(t, 4<<20)
	loop := loopDevice(t, img)

	_, err := openFile(img, OpenOptions{Exclusive: true})
	var ce *ClaimError
	if !errors.As(err, &ce) || !strings.Contains(ce.Holder, loop) {
		t.Fatalf("exclusive open of an image with %s over it: %v", loop, err)
	}

	d, err := openFile(loop, OpenOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Claim() != "O_EXCL" || !d.Direct() {
		t.Fatalf("claim %q, direct %v", d.Claim(), d.Direct())
	}
	if _, err := openFile(loop, OpenOptions{Exclusive: true, ReadOnly: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second exclusive open of %s: %v", loop, err)
	}
	// A second loop device over the same file is refused: the first
	// claim locked the file.
	other := loopDevice(t, img)
	if _, err := openFile(other, OpenOptions{Exclusive: true}); !errors.As(err, &ce) || !strings.Contains(ce.Holder, img) {
		t.Fatalf("exclusive open of a second loop device %s over the same file: %v", other, err)
	}
	mkfs := testtool.Need(t, "mkfs.ext4")
	if out, err := exec.Command(mkfs, "-q", "-F", loop).CombinedOutput(); err == nil {
		t.Fatalf("mkfs.ext4 wrote to the claimed %s", loop)
	} else {
		t.Logf("mkfs.ext4 on the claimed device: %s", strings.TrimSpace(string(out)))
	}
	d.Close()

	// The image claimed first; a loop device set up over it afterwards is
	// refused by name of its backing file.
	img2 := testtool.Image(t, 4<<20)
	f, err := openFile(img2, OpenOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	loop2 := loopDevice(t, img2)
	if _, err := openFile(loop2, OpenOptions{Exclusive: true}); !errors.As(err, &ce) || !strings.Contains(ce.Holder, img2) {
		t.Fatalf("exclusive open of %s over a claimed image: %v", loop2, err)
	}
}
