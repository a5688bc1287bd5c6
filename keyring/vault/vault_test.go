package vault

import (
	"context"
	"errors"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

func TestReadWithCertificateLogin(t *testing.T) {
	srv := testtool.Vault(t, "luksd-host", map[string]map[string]string{
		"secret/pool/disk3": {"key": "00112233445566778899aabbccddeeff", "pass": "a passphrase"},
	})
	for _, c := range []struct{ loc, want string }{
		{"vault:secret/pool/disk3", "\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff"},
		{"vault:/secret/pool/disk3/?field=pass&format=text", "a passphrase"},
	} {
		l, err := ParseLocation(c.loc)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Read(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.loc, err)
		}
		if string(k.Bytes()) != c.want {
			t.Errorf("%s: %q, want %q", c.loc, k.Bytes(), c.want)
		}
		k.Wipe()
	}
	if srv.Logins != 2 {
		t.Errorf("%d certificate logins, want 2", srv.Logins)
	}
	for _, c := range []struct {
		loc  string
		want error
	}{
		{"vault:secret/pool/disk9", ErrNoKey},
		{"vault:secret/pool/disk3?field=nope", ErrNoKey},
		{"vault:secret/pool/disk3?field=pass", ErrNoKey}, // not hex
	} {
		l, _ := ParseLocation(c.loc)
		if _, err := l.Read(context.Background()); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.loc, err, c.want)
		}
	}
	// Without a client certificate the login is refused; a server that
	// is gone is a ServerError naming it.
	t.Setenv("VAULT_CLIENT_CERT", "")
	t.Setenv("VAULT_CLIENT_KEY", "")
	l, _ := ParseLocation("vault:secret/pool/disk3")
	var se *ServerError
	if _, err := l.Read(context.Background()); !errors.As(err, &se) {
		t.Errorf("no client certificate: %v, want a ServerError", err)
	}
	t.Setenv("VAULT_ADDR", "https://127.0.0.1:1")
	if _, err := l.Read(context.Background()); !errors.As(err, &se) || se.Address != "https://127.0.0.1:1" {
		t.Errorf("server gone: %v", err)
	}
}

func TestParseLocationRefuses(t *testing.T) {
	for _, s := range []string{"secret/x", "vault:", "vault:secret/x?format=base32", "vault:../x", "vault:x?%zz"} {
		if _, err := ParseLocation(s); !errors.Is(err, ErrBadLocation) {
			t.Errorf("%s: %v, want ErrBadLocation", s, err)
		}
	}
}
