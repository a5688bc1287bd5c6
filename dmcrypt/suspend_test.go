package dmcrypt

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestSuspendBlocksAndWipes: while suspended, a read waits (and the key is
// gone from the device); Resume with the same key lets it finish with the
// right plaintext; a second Suspend or a Resume of a running device is
// refused; Close releases a request waiting at a suspended device.
func TestSuspendBlocksAndWipes(t *testing.T) {
	d, _, key := newTestDevice(t, 1<<20, DeviceOptions{SectorSize: 4096})
	want := randBytes(t, 8192)
	if _, err := d.WriteAt(want, 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Suspend(); err != nil {
		t.Fatal(err)
	}
	if d.cipher != nil || !d.Suspended() {
		t.Fatal("the sector cipher survived Suspend")
	}
	if err := d.Suspend(); !errors.Is(err, ErrSuspended) {
		t.Fatalf("second Suspend: %v", err)
	}
	got := make([]byte, len(want))
	done := make(chan error, 1)
	go func() { _, err := d.ReadAt(got, 4096); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a read finished on a suspended device: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	c, err := New("aes-xts-plain64", key)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(c); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read after Resume differs from what was written")
	}
	if err := d.Resume(c); !errors.Is(err, ErrSuspended) {
		t.Fatalf("Resume of a running device: %v", err)
	}

	// Close while a request waits: it fails, it does not hang.
	if err := d.Suspend(); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := d.WriteAt(want, 0); done <- err }()
	time.Sleep(20 * time.Millisecond) // let it reach the gate (it fails either way)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a write waiting at a suspended device succeeded after Close")
	}
}
