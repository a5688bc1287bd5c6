package luks2

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// memDev is a Device in memory.
type memDev struct{ b []byte }

func (m *memDev) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, errors.New("read past the end")
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, errors.New("short read")
	}
	return n, nil
}

func (m *memDev) WriteAt(p []byte, off int64) (int, error) { return copy(m.b[off:], p), nil }
func (m *memDev) Flush() error                             { return nil }

// TestMoveAreaOverlapping: the keyslot material moves by less than its
// own length, up (LUKS1 -> LUKS2) and down (LUKS2 -> LUKS1), and arrives
// whole.
func TestMoveAreaOverlapping(t *testing.T) {
	for _, c := range []struct{ from, to, n int64 }{
		{luks1AlignKeyslots, 2 * hdrSize16K, 2064384},
		{2 * hdrSize16K, luks1AlignKeyslots, 2064384},
		{2 * hdrSize16K, luks1AlignKeyslots, 1000},
		{luks1AlignKeyslots, 2 * hdrSize16K, 28673},
	} {
		d := &memDev{b: make([]byte, 4<<20)}
		rand.Read(d.b)
		want := append([]byte(nil), d.b[c.from:c.from+c.n]...)
		if err := moveArea(d, c.from, c.to, c.n); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.b[c.to:c.to+c.n], want) {
			t.Errorf("move %d -> %d of %d bytes: the material arrived changed", c.from, c.to, c.n)
		}
	}
	d := &memDev{b: make([]byte, 1<<20)}
	if err := moveArea(d, 4096, 32768, 1<<20); !errors.Is(err, ErrMoveFailed) {
		t.Errorf("a move past the end of the device: %v, want ErrMoveFailed", err)
	}
}

// TestConvertThereAndBack: a LUKS1 volume converted to LUKS2 opens with
// its passphrase to the same volume key, and converted back is the LUKS1
// header area it was, byte for byte.
func TestConvertThereAndBack(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	pass := []byte("there and back")
	h, vk, err := Format(f, size, FormatOptions{Version: 1, PBKDF: cheapPBKDF2, KeySize: 32}, pass)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(img)
	h2, err := h.Convert(f, size, 2, ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h2.Version() != 2 || h2.UUID() != h.UUID() {
		t.Fatalf("converted: version %d uuid %s", h2.Version(), h2.UUID())
	}
	got, _, err := h2.Unlock(f, pass, -1)
	if err != nil || !bytes.Equal(got, vk) {
		t.Fatalf("the LUKS2 header does not open to the volume key: %v", err)
	}
	h1, err := h2.Convert(f, size, 1, ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(img)
	if end := h1.HeaderSize(); !bytes.Equal(after[:end], before[:end]) {
		t.Error("LUKS1 -> LUKS2 -> LUKS1 changed the header area")
	}
}

// TestConvertRefusalsWriteNothing: a refused conversion (a keyslot LUKS1
// cannot hold, an active volume, the version it has) leaves every byte.
func TestConvertRefusalsWriteNothing(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapArgon2id, SectorSize: 512}, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(img)
	var refused *ConvertError
	if _, err := h.Convert(f, size, 1, ConvertOptions{}); !errors.As(err, &refused) {
		t.Errorf("argon2 keyslot to LUKS1: %v, want a ConvertError", err)
	}
	if _, err := h.Convert(f, size, 2, ConvertOptions{}); !errors.As(err, &refused) {
		t.Errorf("LUKS2 to LUKS2: %v, want a ConvertError", err)
	}
	img1 := filepath.Join(t.TempDir(), "luks1.img")
	os.WriteFile(img1, make([]byte, 20<<20), 0o600)
	f1, size1 := openRW(t, img1)
	h1, _, err := Format(f1, size1, FormatOptions{Version: 1, PBKDF: cheapPBKDF2}, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	before1, _ := os.ReadFile(img1)
	asked := ""
	inUse := ConvertOptions{InUse: func(uuid, typ string) bool { asked = typ + " " + uuid; return true }}
	if _, err := h1.Convert(f1, size1, 2, inUse); !errors.Is(err, ErrConvertInUse) {
		t.Errorf("an active volume: %v, want ErrConvertInUse", err)
	}
	if asked != "LUKS1 "+h1.UUID() {
		t.Errorf("InUse was asked %q", asked)
	}
	after, _ := os.ReadFile(img)
	after1, _ := os.ReadFile(img1)
	if !bytes.Equal(after, before) || !bytes.Equal(after1, before1) {
		t.Error("a refused conversion wrote to the device")
	}
}
