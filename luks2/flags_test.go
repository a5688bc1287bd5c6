package luks2

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestSetFlagsAsCryptsetupReadsThem: flags given in any order are written
// in cryptsetup's order, cryptsetup's luksDump shows them and keeps the
// volume usable, an empty list leaves "(no flags)", and a LUKS1 header or
// an unknown flag is refused with the header untouched.
func TestSetFlagsAsCryptsetupReadsThem(t *testing.T) {
	pass := []byte("flags")
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2}, pass)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetFlags(f, []string{"no-read-workqueue", "allow-discards", "same-cpu-crypt"}); err != nil {
		t.Fatalf("SetFlags: %v", err)
	}
	out := cryptsetup(t, "luksDump", img)
	if !strings.Contains(out, "Flags:       \tallow-discards same-cpu-crypt no-read-workqueue \n") {
		t.Fatalf("cryptsetup's dump after SetFlags:\n%s", out)
	}
	key := testtool.KeyFile(t, pass)
	cryptsetup(t, "open", "--test-passphrase", "--key-file", key, img)

	before, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetFlags(f, []string{"allow-discards", "frobnicate"}); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("a refused SetFlags changed the image")
	}

	if err := h.SetFlags(f, nil); err != nil {
		t.Fatalf("SetFlags(nil): %v", err)
	}
	if out := cryptsetup(t, "luksDump", img); !strings.Contains(out, "Flags:       \t(no flags)\n") {
		t.Fatalf("cryptsetup's dump after clearing the flags:\n%s", out)
	}

	img1 := testtool.Image(t, 20<<20)
	f1, size1 := openRW(t, img1)
	h1, _, err := Format(f1, size1, FormatOptions{Version: 1, PBKDF: cheapPBKDF2}, pass)
	if err != nil {
		t.Fatal(err)
	}
	if err := h1.SetFlags(f1, []string{"allow-discards"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SetFlags on LUKS1: %v, want ErrUnsupported", err)
	}
}
