package clevis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// encrypt has the real clevis 19 encrypt secret with pin and config, and
// returns the compact JWE it prints.
func encrypt(t *testing.T, secret, pin, config string) string {
	t.Helper()
	cmd := exec.Command(testtool.Need(t, "clevis"), "encrypt", pin, config, "-y")
	cmd.Stdin = strings.NewReader(secret)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clevis encrypt %s %s: %v\n%s", pin, config, err, errb.String())
	}
	return strings.TrimSpace(string(out))
}

func decryptCompact(t *testing.T, jwe string) (string, error) {
	t.Helper()
	raw, _ := json.Marshal(jwe)
	var d Decrypter
	pt, err := d.decrypt(context.Background(), raw, 0)
	return string(pt), err
}

func TestTangPinAllCurves(t *testing.T) {
	for _, curve := range []string{"P-256", "P-384", "P-521"} {
		t.Run(curve, func(t *testing.T) {
			srv := testtool.Tang(t, curve)
			jwe := encrypt(t, "the passphrase", "tang", `{"url":"`+srv.URL+`"}`)
			got, err := decryptCompact(t, jwe)
			if err != nil || got != "the passphrase" {
				t.Fatalf("decrypted %q, %v", got, err)
			}
		})
	}
}

// A server that is down is a ServerError naming its URL; a changed byte
// of the ciphertext or of the protected header fails authentication.
func TestTangDownAndTampered(t *testing.T) {
	srv := testtool.Tang(t, "P-521")
	jwe := encrypt(t, "secret", "tang", `{"url":"`+srv.URL+`"}`)
	parts := strings.Split(jwe, ".")
	ct, err := b64.DecodeString(parts[3])
	if err != nil {
		t.Fatal(err)
	}
	ct[0] ^= 1
	tampered := strings.Join([]string{parts[0], parts[1], parts[2], b64.EncodeToString(ct), parts[4]}, ".")
	if _, err := decryptCompact(t, tampered); !errors.Is(err, ErrTampered) {
		t.Fatalf("tampered ciphertext: %v, want ErrTampered", err)
	}
	srv.Stop()
	_, err = decryptCompact(t, jwe)
	var se *ServerError
	if !errors.As(err, &se) || se.URL != srv.URL {
		t.Fatalf("tang down: %v, want a ServerError for %s", err, srv.URL)
	}
}

// sss: t of n nested tang pins; with one server down, t=1 still opens and
// t=2 does not.
func TestSSSThreshold(t *testing.T) {
	a, b := testtool.Tang(t, "P-521"), testtool.Tang(t, "P-256")
	cfg := func(th string) string {
		return `{"t":` + th + `,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`
	}
	one, two := encrypt(t, "shared secret", "sss", cfg("1")), encrypt(t, "shared secret", "sss", cfg("2"))
	for _, jwe := range []string{one, two} {
		if got, err := decryptCompact(t, jwe); err != nil || got != "shared secret" {
			t.Fatalf("both servers up: %q, %v", got, err)
		}
	}
	a.Stop()
	if got, err := decryptCompact(t, one); err != nil || got != "shared secret" {
		t.Fatalf("t=1, one server down: %q, %v", got, err)
	}
	var se *ServerError
	if _, err := decryptCompact(t, two); !errors.As(err, &se) {
		t.Fatalf("t=2, one server down: %v, want a ServerError", err)
	}
}

func TestTokenPassphraseRefusesOtherJSON(t *testing.T) {
	var d Decrypter
	for _, js := range []string{`{"type":"luks2-keyring"}`, `{"type":"clevis"}`, `{"type":"clevis","jwe":{"protected":"e30"}}`, `[`} {
		if _, err := d.TokenPassphrase(context.Background(), []byte(js)); !errors.Is(err, ErrBadJWE) {
			t.Errorf("%s: %v, want ErrBadJWE", js, err)
		}
	}
}
