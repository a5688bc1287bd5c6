// Package clevis unlocks LUKS2 tokens that clevis 19 (`clevis luks bind`)
// writes: {"type":"clevis","keyslots":[...],"jwe":{...}}, a JWE whose
// plaintext is the keyslot's passphrase. The pins are tang (the
// McCallum-Relyea exchange with a tang server, tang.go) and sss (Shamir's
// threshold over nested pins, sss.go); jwe.go reads and decrypts the JWE.
//
// JOSE keys and the Concat KDF come from go-jose, point arithmetic from
// filippo.io/nistec, AES-GCM from the standard library; this package
// holds the protocol glue between them.
package clevis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/luksd/luksd/keyring"
)

var (
	// ErrBadJWE: the token's JWE is not one clevis makes or luksd reads.
	ErrBadJWE = errors.New("clevis: malformed JWE")
	// ErrTampered: the JWE's authentication tag does not match: the
	// ciphertext or its header changed, or the key is not the one bound.
	ErrTampered = errors.New("clevis: JWE authentication failed (tampered, or bound to another key)")
	// ErrBadReply: a tang server's answer is not a point on the curve.
	ErrBadReply = errors.New("clevis: invalid answer from the tang server")
	// ErrUnsupportedPin: a pin luksd does not implement (tpm2, ...).
	ErrUnsupportedPin = errors.New("clevis: pin not supported by luksd")
)

// A ServerError is a tang server that could not be reached or refused
// the recovery request.
type ServerError struct {
	URL string
	Err error
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("clevis: tang server %s: %v", e.URL, e.Err)
}
func (e *ServerError) Unwrap() error { return e.Err }

// maxDepth bounds sss pins nested in sss pins.
const maxDepth = 8

// A Decrypter decrypts clevis JWEs, reaching tang servers with Client.
type Decrypter struct {
	Client *http.Client // nil: defaultClient
}

// defaultClient gives up on a tang server after tangTimeout, so that a
// server that swallows packets delays the passphrase prompt, not forever.
var defaultClient = &http.Client{Timeout: tangTimeout}

const tangTimeout = 30 * time.Second

// TokenPassphrase decrypts the JWE of the clevis token js (the token's
// JSON) and returns the keyslot passphrase it holds.
func (d *Decrypter) TokenPassphrase(ctx context.Context, js []byte) (*keyring.Secret, error) {
	var tok struct {
		Type string          `json:"type"`
		JWE  json.RawMessage `json:"jwe"`
	}
	if err := json.Unmarshal(js, &tok); err != nil || tok.Type != "clevis" || tok.JWE == nil {
		return nil, fmt.Errorf("%w: not a clevis token with a jwe", ErrBadJWE)
	}
	pt, err := d.decrypt(ctx, tok.JWE, 0)
	if err != nil {
		return nil, err
	}
	return keyring.FromBytes(pt)
}

// decrypt decrypts one JWE (flattened object or compact string) with the
// key its pin recovers. The caller wipes the result.
func (d *Decrypter) decrypt(ctx context.Context, raw json.RawMessage, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: sss pins nested deeper than %d", ErrBadJWE, maxDepth)
	}
	j, h, err := parseJWE(raw)
	if err != nil {
		return nil, err
	}
	var cek []byte
	switch h.Clevis.Pin {
	case "tang":
		cek, err = tangKey(ctx, d.client(), h)
	case "sss":
		cek, err = d.sssKey(ctx, h, depth)
	case "":
		return nil, fmt.Errorf("%w: no clevis pin in the header", ErrBadJWE)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedPin, h.Clevis.Pin)
	}
	if err != nil {
		return nil, err
	}
	defer clear(cek)
	return j.decrypt(h.Enc, cek)
}

func (d *Decrypter) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	return defaultClient
}
