package luks2

import (
	"errors"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

var errStopped = errors.New("stopped")

// stopAfter is f whose writes stop (fail, writing nothing) after n of
// them: a crash at that point.
func stopAfter(f fileDev, n int) *devtest.FailAfter {
	d := devtest.NewFailAfter(f)
	d.Writes(n, errStopped)
	return d
}

// formatSlot0 formats a new image with pass in keyslot 0 (cheap PBKDF2)
// and unlocks it; it returns the keyslot's area offset too.
func formatSlot0(t *testing.T, pass []byte) (img string, f fileDev, h *Header, key []byte, slot int, area uint64) {
	t.Helper()
	img = testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2, Keyslot: 0}, pass)
	if err != nil {
		t.Fatal(err)
	}
	area = h.impl.(*header).meta.keyslots[0].areaOffset
	key, slot, err = h.Unlock(f, pass, 0)
	if err != nil {
		t.Fatal(err)
	}
	return img, f, h, key, slot, area
}

// TestConvertKeyCrashSafe stops ConvertKey after every write it makes, in
// place and not, and checks that the passphrase still opens the header
// left on disk, with the old or the new PBKDF.
func TestConvertKeyCrashSafe(t *testing.T) {
	pass := []byte("convert")
	for _, inPlace := range []bool{true, false} {
		for n := 0; ; n++ {
			img, f, h, key, slot, oldArea := formatSlot0(t, pass)
			err := h.ConvertKey(stopAfter(f, n), slot, key, pass, cheapArgon2id, inPlace)
			if err != nil && !errors.Is(err, errStopped) {
				t.Fatalf("in place %v, stop after %d writes: %v", inPlace, n, err)
			}
			h2, f2 := readHdr(t, img)
			if _, _, err := h2.Unlock(f2, pass, 0); err != nil {
				t.Fatalf("in place %v, stopped after %d writes: the passphrase no longer opens: %v", inPlace, n, err)
			}
			if err == nil {
				k := h2.impl.(*header).meta.keyslots[0]
				if k.kdf.typ != "argon2id" || k.kdf.time != 4 {
					t.Fatalf("in place %v: keyslot 0 kdf %+v after ConvertKey", inPlace, k.kdf)
				}
				if inPlace && k.areaOffset != oldArea {
					t.Fatalf("in place: area moved from %d to %d", oldArea, k.areaOffset)
				}
				if !inPlace && k.areaOffset == oldArea {
					t.Fatal("not in place: area did not move")
				}
				break
			}
			if n > 100 {
				t.Fatal("ConvertKey never finished")
			}
		}
	}
}

func TestConvertKeyRefusals(t *testing.T) {
	pass := []byte("convert")
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2, Keyslot: 0}, pass)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := h.Unlock(f, pass, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ConvertKey(f, 1, key, pass, cheapPBKDF2, true); err == nil {
		t.Error("converted an inactive keyslot")
	}
	bad := append([]byte(nil), key...)
	bad[0] ^= 1
	if err := h.ConvertKey(f, 0, bad, pass, cheapPBKDF2, true); !errors.Is(err, ErrVolumeKeyMismatch) {
		t.Errorf("wrong key: %v", err)
	}
}

// TestChangeKeyCrashSafe stops ChangeKey after every write it makes and
// checks that the old or the new passphrase opens what is left; once done,
// only the new one opens keyslot 0, whose key material has moved to the
// first free area.
func TestChangeKeyCrashSafe(t *testing.T) {
	old, next := []byte("old passphrase"), []byte("new passphrase")
	for n := 0; ; n++ {
		img, f, h, key, slot, oldArea := formatSlot0(t, old)
		err := h.ChangeKey(stopAfter(f, n), slot, key, next, cheapPBKDF2)
		if err != nil && !errors.Is(err, errStopped) {
			t.Fatalf("stop after %d writes: %v", n, err)
		}
		h2, f2 := readHdr(t, img)
		_, _, errOld := h2.Unlock(f2, old, 0)
		_, _, errNew := h2.Unlock(f2, next, 0)
		if errOld != nil && errNew != nil {
			t.Fatalf("stopped after %d writes: neither passphrase opens (%v; %v)", n, errOld, errNew)
		}
		if err == nil {
			if errNew != nil || errOld == nil {
				t.Fatalf("after ChangeKey: new passphrase %v, old passphrase %v", errNew, errOld)
			}
			if a := h2.impl.(*header).meta.keyslots[0].areaOffset; a == oldArea {
				t.Fatalf("keyslot 0 still at %d", a)
			}
			break
		}
		if n > 100 {
			t.Fatal("ChangeKey never finished")
		}
	}
}
