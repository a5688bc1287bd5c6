package token

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/luks2"
)

// volume formats an image with cryptsetup (keyslot 0: "zero", keyslot 1:
// "one"), imports tokens and reads the header.
func volume(t *testing.T, tokens ...string) (*luks2.Header, *os.File) {
	t.Helper()
	img := testtool.Image(t, 20<<20)
	testtool.CryptsetupFormat(t, img, testtool.KeyFile(t, []byte("zero")))
	testtool.Run(t, "cryptsetup", "luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--key-file", testtool.KeyFile(t, []byte("zero")), img, testtool.KeyFile(t, []byte("one")))
	for _, js := range tokens {
		p := testtool.KeyFile(t, []byte(js))
		testtool.Run(t, "cryptsetup", "token", "import", "--json-file", p, img)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, _ := f.Stat()
	h, err := luks2.Read(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return h, f
}

func keyringToken(slot, desc string) string {
	return `{"type":"luks2-keyring","keyslots":["` + slot + `"],"key_description":"` + desc + `"}`
}

// The first token whose key opens its keyslot wins; one whose key is
// wrong or missing is passed over, and when none opens the error ranks
// as cryptsetup's: wrong passphrase over no usable token.
func TestUnlockKeyringTokens(t *testing.T) {
	testtool.KeyringSession(t)
	h, f := volume(t, keyringToken("0", "luksd-test:a"), keyringToken("1", "luksd-test:b"))
	ctx := context.Background()
	any := Options{ID: -1}
	if _, _, _, err := Unlock(ctx, h, f, any); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("no keys: %v, want ErrWrongPassphrase", err)
	}
	testtool.AddKernelKey(t, "user", "luksd-test:a", []byte("wrong"))
	testtool.AddKernelKey(t, "user", "luksd-test:b", []byte("one"))
	vk, slot, id, err := Unlock(ctx, h, f, any)
	if err != nil || slot != 1 || id != 1 {
		t.Fatalf("slot %d token %d: %v", slot, id, err)
	}
	vk.Wipe()
	if _, _, _, err := Unlock(ctx, h, f, Options{ID: 0}); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("token 0: %v, want ErrWrongPassphrase", err)
	}
	for _, o := range []Options{{ID: 5}, {ID: -1, Type: "clevis"}} {
		if _, _, _, err := Unlock(ctx, h, f, o); !errors.Is(err, ErrNoToken) {
			t.Fatalf("%+v: %v, want ErrNoToken", o, err)
		}
	}
	for _, id := range []int{-2, 32} {
		if _, _, _, err := Unlock(ctx, h, f, Options{ID: id}); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("token id %d: %v, want ErrInvalidID", id, err)
		}
	}
}

// A clevis token is an external one: --disable-external-tokens leaves it
// out; an unknown type has no handler. Neither runs anything.
func TestExternalAndUnknownTypes(t *testing.T) {
	h, f := volume(t, `{"type":"clevis","keyslots":["0"],"jwe":{"protected":"e30"}}`, `{"type":"luksd-test-unknown","keyslots":["1"]}`)
	var warned []string
	o := Options{ID: -1, Warn: func(s string) { warned = append(warned, s) }}
	if _, _, _, err := Unlock(context.Background(), h, f, o); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("broken clevis token: %v, want ErrWrongPassphrase", err)
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "Token 0 (clevis): ") {
		t.Fatalf("warnings %q", warned)
	}
	o.NoExternal, warned = true, nil
	if _, _, _, err := Unlock(context.Background(), h, f, o); !errors.Is(err, ErrNoToken) || warned != nil {
		t.Fatalf("external tokens disabled: %v, warnings %q", err, warned)
	}
}
