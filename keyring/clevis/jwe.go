package clevis

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-jose/go-jose/v4"
	josecipher "github.com/go-jose/go-jose/v4/cipher"
)

// A jwe is a JWE as clevis writes it: the flattened JSON serialization in
// a LUKS2 token, the compact one nested in an sss pin. Its members stay
// base64url text: the protected header's text is the AEAD's associated
// data.
type jwe struct {
	Protected    string `json:"protected"`
	EncryptedKey string `json:"encrypted_key"`
	IV           string `json:"iv"`
	Ciphertext   string `json:"ciphertext"`
	Tag          string `json:"tag"`
	AAD          string `json:"aad,omitempty"`
	Unprotected  any    `json:"unprotected,omitempty"`
	Header       any    `json:"header,omitempty"`
	Recipients   any    `json:"recipients,omitempty"`
}

// header is the protected header of a clevis JWE.
type header struct {
	Alg    string           `json:"alg"`
	Enc    string           `json:"enc"`
	Zip    string           `json:"zip"`
	Kid    string           `json:"kid"`
	APU    string           `json:"apu"`
	APV    string           `json:"apv"`
	EPK    *jose.JSONWebKey `json:"epk"`
	Clevis struct {
		Pin  string          `json:"pin"`
		Tang json.RawMessage `json:"tang"`
		SSS  json.RawMessage `json:"sss"`
		TPM2 json.RawMessage `json:"tpm2"`
	} `json:"clevis"`
}

var b64 = base64.RawURLEncoding

// parseJWE reads a JWE from its JSON value: a flattened object, or a
// string holding the compact serialization. Only what clevis makes is
// taken: one recipient, no unprotected header, no extra AAD.
func parseJWE(raw json.RawMessage) (*jwe, *header, error) {
	var j jwe
	var compact string
	if err := json.Unmarshal(raw, &compact); err == nil {
		parts := strings.Split(compact, ".")
		if len(parts) != 5 {
			return nil, nil, fmt.Errorf("%w: compact JWE has %d parts, not 5", ErrBadJWE, len(parts))
		}
		j = jwe{Protected: parts[0], EncryptedKey: parts[1], IV: parts[2], Ciphertext: parts[3], Tag: parts[4]}
	} else if err := json.Unmarshal(raw, &j); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadJWE, err)
	}
	if j.AAD != "" || j.Unprotected != nil || j.Header != nil || j.Recipients != nil {
		return nil, nil, fmt.Errorf("%w: unprotected members or several recipients", ErrBadJWE)
	}
	if j.EncryptedKey != "" {
		return nil, nil, fmt.Errorf("%w: an encrypted key with a direct key agreement", ErrBadJWE)
	}
	p, err := b64.DecodeString(j.Protected)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: protected header: %v", ErrBadJWE, err)
	}
	var h header
	if err := json.Unmarshal(p, &h); err != nil {
		return nil, nil, fmt.Errorf("%w: protected header: %v", ErrBadJWE, err)
	}
	if h.Zip != "" {
		return nil, nil, fmt.Errorf("%w: compressed (zip %q) payloads are not supported", ErrBadJWE, h.Zip)
	}
	return &j, &h, nil
}

// keySize is the content key length of enc, the AES-GCM algorithms
// clevis uses (A256GCM by default).
func keySize(enc string) (int, error) {
	switch enc {
	case "A128GCM":
		return 16, nil
	case "A192GCM":
		return 24, nil
	case "A256GCM":
		return 32, nil
	}
	return 0, fmt.Errorf("%w: content encryption %q is not supported", ErrBadJWE, enc)
}

// decrypt opens the JWE's content with the content encryption key cek.
// The caller wipes the result.
func (j *jwe) decrypt(enc string, cek []byte) ([]byte, error) {
	if n, err := keySize(enc); err != nil {
		return nil, err
	} else if len(cek) != n {
		return nil, fmt.Errorf("%w: a %d-byte key for %s", ErrBadJWE, len(cek), enc)
	}
	iv, err1 := b64.DecodeString(j.IV)
	ct, err2 := b64.DecodeString(j.Ciphertext)
	tag, err3 := b64.DecodeString(j.Tag)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJWE, err)
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil || len(tag) != gcm.Overhead() {
		return nil, fmt.Errorf("%w: IV or tag of the wrong size", ErrBadJWE)
	}
	pt, err := gcm.Open(nil, iv, append(ct, tag...), []byte(j.Protected))
	if err != nil {
		return nil, ErrTampered
	}
	return pt, nil
}

// ecdhesKey derives the content key of an ECDH-ES JWE (direct key
// agreement) from the shared secret z, the x coordinate of the agreed
// point, with the Concat KDF of RFC 7518 section 4.6.2.
func ecdhesKey(h *header, z []byte) ([]byte, error) {
	n, err := keySize(h.Enc)
	if err != nil {
		return nil, err
	}
	apu, err1 := b64.DecodeString(h.APU)
	apv, err2 := b64.DecodeString(h.APV)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%w: apu/apv: %v", ErrBadJWE, err)
	}
	supPub := []byte{0, 0, byte(n * 8 >> 8), byte(n * 8)}
	kdf := josecipher.NewConcatKDF(crypto.SHA256, z, lengthPrefixed([]byte(h.Enc)), lengthPrefixed(apu), lengthPrefixed(apv), supPub, nil)
	key := make([]byte, n)
	if _, err := io.ReadFull(kdf, key); err != nil {
		return nil, err
	}
	return key, nil
}

// lengthPrefixed is b after its 32-bit big-endian length, the Concat
// KDF's encoding of its fields.
func lengthPrefixed(b []byte) []byte {
	n := len(b)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, b...)
}
