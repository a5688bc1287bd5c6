package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/luksd/luksd/keyring"
)

// A plain volume opened --shared claims nothing: it opens beside a volume
// that claims the same image (another, non-overlapping mapping, as
// cryptsetup's --shared), where a second claiming volume is refused.
func TestOpenSharedBesideClaim(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(offset int64, shared bool) error {
		t.Helper()
		key, err := keyring.FromBytes(bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		spec := Spec{Location: img, Type: "PLAIN",
			Segment: Segment{Cipher: "aes-cbc-essiv:sha256", Offset: offset, Size: 1 << 20, SectorSize: 512, KeySize: 32},
			Options: Options{Shared: shared}}
		d, _, _, err := openCrypt(spec, key)
		if err == nil {
			t.Cleanup(func() { d.Close() })
		}
		return err
	}
	if err := open(0, false); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if err := open(1<<20, false); !errors.As(err, &e) || e.Kind != ErrBusy {
		t.Fatalf("a second claim: %v, want ErrBusy", err)
	}
	if err := open(2<<20, true); err != nil {
		t.Fatalf("--shared beside a claim: %v", err)
	}
}
