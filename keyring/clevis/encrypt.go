package clevis

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrBadConfig: a pin configuration clevis 19 would refuse too.
var ErrBadConfig = errors.New("clevis: bad pin configuration")

// An Encrypter makes clevis JWEs: what `clevis encrypt PIN CONFIG`
// prints, and what `clevis luks bind` stores in a token.
type Encrypter struct {
	Client *http.Client // nil: defaultClient
	// Trust decides, for a tang server whose configuration names no
	// thumbprint, whether to trust the keys that signed its
	// advertisement (clevis's "Do you wish to trust these keys?"); it
	// gets their SHA-256 thumbprints. Nil, or -y: trust them.
	Trust func(url string, thumbprints []string) bool
}

// Encrypt seals plaintext to pin ("tang" or "sss") with config, the
// pin's JSON configuration in clevis 19's syntax, and returns the JWE in
// the compact serialization.
func (e *Encrypter) Encrypt(ctx context.Context, pin string, config []byte, plaintext []byte) (string, error) {
	return e.encrypt(ctx, pin, config, plaintext, 0)
}

func (e *Encrypter) encrypt(ctx context.Context, pin string, config []byte, plaintext []byte, depth int) (string, error) {
	if depth > maxDepth {
		return "", fmt.Errorf("%w: sss pins nested deeper than %d", ErrBadConfig, maxDepth)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(config, &cfg); err != nil {
		return "", fmt.Errorf("%w: configuration is malformed; it should be a JSON object", ErrBadConfig)
	}
	var h *sealHeader
	var cek []byte
	var err error
	switch pin {
	case "tang":
		h, cek, err = e.tangSeal(ctx, cfg)
	case "sss":
		h, cek, err = e.sssSeal(ctx, cfg, depth)
	default:
		return "", fmt.Errorf("%w: '%s' is not a valid pin", ErrUnsupportedPin, pin)
	}
	if err != nil {
		return "", err
	}
	defer clear(cek)
	return h.seal(cek, plaintext)
}

func (e *Encrypter) client() *http.Client {
	if e.Client != nil {
		return e.Client
	}
	return defaultClient
}

// sealHeader is the protected header of a JWE being made, written out as
// clevis's jose writes it (members sorted by name).
type sealHeader struct {
	Alg    string          `json:"alg"`
	Clevis json.RawMessage `json:"clevis"`
	Enc    string          `json:"enc"`
	EPK    json.RawMessage `json:"epk,omitempty"`
	Kid    string          `json:"kid,omitempty"`
}

// seal encrypts plaintext with the content key cek (AES-256-GCM, a
// 96-bit random IV, the protected header's text as associated data) and
// returns the compact serialization; clevis never sends an encrypted key.
func (h *sealHeader) seal(cek, plaintext []byte) (string, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	protected := b64.EncodeToString(js)
	block, err := aes.NewCipher(cek)
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	iv := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	sealed := gcm.Seal(nil, iv, plaintext, []byte(protected))
	ct, tag := sealed[:len(plaintext)], sealed[len(plaintext):]
	return strings.Join([]string{protected, "", b64.EncodeToString(iv), b64.EncodeToString(ct), b64.EncodeToString(tag)}, "."), nil
}

// Flattened turns a compact JWE into the flattened JSON serialization
// clevis stores in a LUKS2 token (`jose jwe fmt`'s output).
func Flattened(compact string) (json.RawMessage, error) {
	j, _, err := parseJWE(mustQuote(compact))
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Ciphertext   string `json:"ciphertext"`
		EncryptedKey string `json:"encrypted_key"`
		IV           string `json:"iv"`
		Protected    string `json:"protected"`
		Tag          string `json:"tag"`
	}{j.Ciphertext, j.EncryptedKey, j.IV, j.Protected, j.Tag})
}

// mustQuote is s as a JSON string.
func mustQuote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
