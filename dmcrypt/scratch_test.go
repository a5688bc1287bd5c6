package dmcrypt

import (
	"bytes"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// TestWriteAtScratchMatchesWriteAt: writing through WriteAtScratch leaves
// the backend exactly as WriteAt does, aligned or not, and an aligned
// write is encrypted in the caller's buffer (no copy), an unaligned one
// leaves it alone.
func TestWriteAtScratchMatchesWriteAt(t *testing.T) {
	for _, ss := range []int{512, 4096} {
		a, ma, key := newTestDevice(t, 1<<20, DeviceOptions{SectorSize: ss})
		c, err := New("aes-xts-plain64", key)
		if err != nil {
			t.Fatal(err)
		}
		mb := devtest.NewMem(1 << 20)
		b, err := NewDevice(mb, c, DeviceOptions{SectorSize: ss})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct{ off, n int }{
			{0, ss}, {ss, 256 << 10}, {3 * ss, 5 * ss}, // whole sectors
			{100, 1000}, {ss - 1, ss + 2}, // partial: read-modify-write
		} {
			data := randBytes(t, w.n)
			if _, err := a.WriteAt(data, int64(w.off)); err != nil {
				t.Fatal(err)
			}
			buf := bytes.Clone(data)
			if n, err := b.WriteAtScratch(buf, int64(w.off)); err != nil || n != w.n {
				t.Fatalf("sector %d: WriteAtScratch(%d at %d) = %d, %v", ss, w.n, w.off, n, err)
			}
			aligned := w.off%ss == 0 && w.n%ss == 0
			if aligned == bytes.Equal(buf, data) {
				t.Fatalf("sector %d, %d at %d: buffer changed %v, want changed only when aligned", ss, w.n, w.off, !aligned)
			}
			if !bytes.Equal(ma.Bytes(), mb.Bytes()) {
				t.Fatalf("sector %d, %d at %d: backends differ after WriteAt and WriteAtScratch", ss, w.n, w.off)
			}
			got := make([]byte, w.n)
			if _, err := b.ReadAt(got, int64(w.off)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("sector %d, %d at %d: read back %v", ss, w.n, w.off, err)
			}
		}
	}
}

// TestWriteAtScratchRefuses: the same bounds and read-only checks as WriteAt.
func TestWriteAtScratchRefuses(t *testing.T) {
	d, _, _ := newTestDevice(t, 1<<20, DeviceOptions{SectorSize: 512, ReadOnly: true})
	if _, err := d.WriteAtScratch(make([]byte, 512), 0); err == nil {
		t.Fatal("WriteAtScratch on a read-only device succeeded")
	}
	d, _, _ = newTestDevice(t, 1<<20, DeviceOptions{SectorSize: 512})
	if _, err := d.WriteAtScratch(make([]byte, 1024), d.Size()-512); err == nil {
		t.Fatal("WriteAtScratch past the end succeeded")
	}
}
