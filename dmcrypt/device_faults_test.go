package dmcrypt

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// faultyCrypt is the crypt layer over Tracked over a fault layer.
func faultyCrypt(t *testing.T, sectorSize int) (*Device, *devtest.Faulty) {
	t.Helper()
	c, err := New("aes-xts-plain64", randBytes(t, 64))
	if err != nil {
		t.Fatal(err)
	}
	faulty := devtest.NewFaulty(devtest.NewMem(1 << 20))
	d, err := NewDevice(blockdev.Track(faulty), c, DeviceOptions{Offset: 64 << 10, SectorSize: sectorSize})
	if err != nil {
		t.Fatal(err)
	}
	return d, faulty
}

// A write that fails on the backend fails with EIO. An acknowledged sector
// that a failed flush may have lost fails every later flush, and a
// partial-sector write into it is refused: its read-modify-write would
// pass the sector's unknown bytes off as written. Writing the whole sector
// again settles it.
func TestDeviceLostSectorNotLaundered(t *testing.T) {
	const ss = 4096
	d, faulty := faultyCrypt(t, ss)
	before := randBytes(t, 4*ss)
	if _, err := d.WriteAt(before, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultWrite, 64<<10+2*ss, ss)
	if _, err := d.WriteAt(randBytes(t, ss), 2*ss); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write to the failing sector = %v, want EIO", err)
	}
	faulty.Heal()
	if _, err := d.WriteAt(randBytes(t, ss), 2*ss); err != nil {
		t.Fatal(err)
	}
	faulty.Fail(devtest.FaultFlush, 0, 0)
	if err := d.Flush(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush = %v", err)
	}
	faulty.Heal()
	for range 2 {
		if err := d.Flush(); !errors.Is(err, blockdev.ErrLostWrites) {
			t.Fatalf("flush after the lost write = %v", err)
		}
	}
	if _, err := d.WriteAt([]byte("patch"), 2*ss+100); !errors.Is(err, blockdev.ErrLostWrites) {
		t.Fatalf("partial write into the lost sector = %v, want ErrLostWrites", err)
	}
	// A partial write into a sector that was not lost works.
	if _, err := d.WriteAt([]byte("patch"), 3*ss+100); err != nil {
		t.Fatal(err)
	}
	whole := randBytes(t, ss)
	if _, err := d.WriteAt(whole, 2*ss); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush after the sector was written again: %v", err)
	}
	got := make([]byte, 4*ss)
	if _, err := d.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), before[:2*ss]...), whole...), before[3*ss:]...)
	copy(want[3*ss+100:], "patch")
	if !bytes.Equal(got, want) {
		t.Fatal("the volume does not read back what was written")
	}
}

// WriteAtFUA writes what WriteAt would, durable when it returns: over a
// backend without FUA writes of its own, it flushes.
func TestDeviceWriteAtFUA(t *testing.T) {
	c, err := New("aes-xts-plain64", randBytes(t, 64))
	if err != nil {
		t.Fatal(err)
	}
	mem := devtest.NewMem(1 << 20)
	d, err := NewDevice(blockdev.Track(mem), c, DeviceOptions{SectorSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	want := randBytes(t, 200<<10)
	if _, err := d.WriteAtFUA(want, 1000); err != nil {
		t.Fatal(err)
	}
	if mem.Flushes() == 0 {
		t.Fatal("a FUA write over a backend without FUA did not flush")
	}
	got := make([]byte, len(want))
	if _, err := d.ReadAt(got, 1000); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back after WriteAtFUA: %v", err)
	}
}
