// Package vault reads keys from a HashiCorp Vault or OpenBao server the
// way Vitastor keeps per-image keys there: the client logs in with its
// TLS client certificate (the cert auth method, POST
// /v1/auth/cert/login) and reads a KV version 1 secret (GET
// /v1/secret/ID) whose field holds the key, in hex by default. The
// server's address, CA and the client's certificate come from Vault's
// own environment variables (VAULT_ADDR, VAULT_CACERT, VAULT_CAPATH,
// VAULT_CLIENT_CERT, VAULT_CLIENT_KEY), as the vault CLI takes them;
// nothing secret is read from the environment or the command line: the
// certificate's private key stays in its file.
package vault

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/luksd/luksd/keyring"
)

var (
	// ErrBadLocation: a vault: location luksd cannot read.
	ErrBadLocation = errors.New("vault: bad key location")
	// ErrNoKey: the secret has no such field, or its value is not a key.
	ErrNoKey = errors.New("vault: the secret holds no key")
)

// A ServerError is a Vault server that could not be reached or refused
// the login or the read.
type ServerError struct {
	Address string
	Err     error
}

func (e *ServerError) Error() string { return fmt.Sprintf("vault %s: %v", e.Address, e.Err) }
func (e *ServerError) Unwrap() error { return e.Err }

// A Location names a key in Vault: the secret's path (without /v1/),
// the field and how its value is written.
type Location struct {
	Path   string // e.g. "secret/pool1-disk3"
	Field  string // default "key"
	Format string // "hex" (default, Vitastor's) or "text"
	Mount  string // cert auth mount, default "cert"
}

// ParseLocation reads "vault:PATH[?field=F&format=hex|text&auth=MOUNT]".
func ParseLocation(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, "vault:")
	if !ok {
		return Location{}, fmt.Errorf("%w: %q is not vault:PATH", ErrBadLocation, s)
	}
	p, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %v", ErrBadLocation, err)
	}
	l := Location{Path: strings.Trim(p, "/"), Field: q.Get("field"), Format: q.Get("format"), Mount: q.Get("auth")}
	return l, l.check()
}

func (l *Location) check() error {
	if l.Field == "" {
		l.Field = "key"
	}
	if l.Format == "" {
		l.Format = "hex"
	}
	if l.Mount == "" {
		l.Mount = "cert"
	}
	switch {
	case l.Path == "" || strings.Contains(l.Path, ".."):
		return fmt.Errorf("%w: no secret path", ErrBadLocation)
	case l.Format != "hex" && l.Format != "text":
		return fmt.Errorf("%w: format %q (hex or text)", ErrBadLocation, l.Format)
	}
	return nil
}

// timeout bounds a whole read, so an unreachable server delays an
// unlock, not forever.
const timeout = 30 * time.Second

// Read logs in with the client certificate and returns the key at l.
func (l Location) Read(ctx context.Context) (*keyring.Secret, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("vault: configuration: %w", cfg.Error)
	}
	cfg.Timeout = timeout
	client, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	client.ClearToken() // never VAULT_TOKEN: the certificate is the credential
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := client.Address()
	login, err := client.Logical().WriteWithContext(ctx, "auth/"+l.Mount+"/login", nil)
	if err != nil {
		return nil, &ServerError{addr, fmt.Errorf("certificate login: %w", err)}
	}
	if login == nil || login.Auth == nil || login.Auth.ClientToken == "" {
		return nil, &ServerError{addr, errors.New("certificate login gave no token")}
	}
	client.SetToken(login.Auth.ClientToken)
	defer client.ClearToken()
	s, err := client.Logical().ReadWithContext(ctx, l.Path)
	if err != nil {
		return nil, &ServerError{addr, fmt.Errorf("reading %s: %w", l.Path, err)}
	}
	if s == nil {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoKey, l.Path)
	}
	v, ok := s.Data[l.Field].(string)
	if !ok || v == "" {
		return nil, fmt.Errorf("%w: %s has no field %q", ErrNoKey, l.Path, l.Field)
	}
	if l.Format == "text" {
		return keyring.FromBytes([]byte(v))
	}
	key, err := hex.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return nil, fmt.Errorf("%w: field %q of %s is not hex", ErrNoKey, l.Field, l.Path)
	}
	defer clear(key)
	return keyring.FromBytes(key)
}
