package daemon

import (
	"errors"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/daemon/frontend"
)

// fixedAttachment is a kernel device that cannot change size while
// attached, as /dev/ublkbN under Linux 6.12.
type fixedAttachment struct{ frontend.Attachment }

// sizedMem is a crypt layer stand-in that records Resize.
type sizedMem struct {
	size    int64
	backend blockdev.Device
}

func (s *sizedMem) Size() int64              { return s.size }
func (s *sizedMem) Resize(n int64) error     { s.size = n; return nil }
func (s *sizedMem) Backend() blockdev.Device { return s.backend }
func (s *sizedMem) CanDiscard() bool         { return true }
func (s *sizedMem) SetDiscards(bool) error   { return nil }

// TestResizeRefusedWithoutLiveResize: a frontend whose kernel device
// cannot change size refuses resize with one line that says to close and
// open again, and changes nothing.
func TestResizeRefusedWithoutLiveResize(t *testing.T) {
	dev := &sizedMem{size: 1 << 20, backend: devtest.NewMem(4 << 20)}
	st := &State{Name: "u", Device: "/dev/ublkb3", Frontend: "ublk", SectorSize: 512}
	r := &liveControl{st: st, dev: dev, att: fixedAttachment{}}
	err := r.resize(0)
	const want = "luksd cannot resize /dev/ublkb3 while it is attached (Linux 6.12's ublk has no live size update); close and open u again."
	if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Fatalf("resize on ublk: %v, want %q", err, want)
	}
	if dev.size != 1<<20 {
		t.Fatalf("size changed to %d", dev.size)
	}
}
