// Package tpm2 unlocks LUKS2 tokens that systemd-cryptenroll --tpm2-device
// writes (systemd 252's "systemd-tpm2" type): a secret sealed by the TPM
// to the values of some PCRs, whose base64 text is the keyslot's
// passphrase. Unsealing recreates systemd's primary key in the owner
// hierarchy, loads the sealed object under it and unseals it in a policy
// session that asserts the same PCRs (PolicyPCR), so it succeeds only
// while they hold the values they held at enrolment.
//
// TPM commands and their encoding come from github.com/google/go-tpm;
// this package holds the glue to systemd's token.
package tpm2

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/luksd/luksd/keyring"
)

var (
	// ErrBadToken: the token is not one systemd 252 writes.
	ErrBadToken = errors.New("systemd-tpm2: malformed token")
	// ErrPIN: the token needs a TPM2 PIN and none was given.
	ErrPIN = errors.New("systemd-tpm2: the token needs a TPM2 PIN")
	// ErrPolicy: the TPM refused to unseal: the PCRs no longer hold their
	// enrolled values, or the PIN is wrong.
	ErrPolicy = errors.New("systemd-tpm2: the TPM refused to unseal (PCR values changed, or a wrong PIN)")
)

// A Token is a systemd-tpm2 token's sealing parameters.
type Token struct {
	PCRs       []int  // the PCRs the secret is sealed to
	Bank       string // their hash bank: "sha256" or "sha1"
	PrimaryAlg string // the primary key's type: "ecc" or "rsa"
	Private    []byte // TPM2B_PRIVATE of the sealed object
	Public     []byte // TPM2B_PUBLIC of the sealed object
	PolicyHash []byte // the sealed object's policy digest
	PIN        bool
}

// ParseToken reads the JSON of a systemd-tpm2 token.
func ParseToken(js []byte) (*Token, error) {
	var t struct {
		Type       string `json:"type"`
		Blob       string `json:"tpm2-blob"`
		PCRs       []int  `json:"tpm2-pcrs"`
		Bank       string `json:"tpm2-pcr-bank"`
		PrimaryAlg string `json:"tpm2-primary-alg"`
		PolicyHash string `json:"tpm2-policy-hash"`
		PIN        bool   `json:"tpm2-pin"`
	}
	if err := json.Unmarshal(js, &t); err != nil || t.Type != "systemd-tpm2" {
		return nil, fmt.Errorf("%w: not a systemd-tpm2 token", ErrBadToken)
	}
	blob, err1 := base64.StdEncoding.DecodeString(t.Blob)
	policy, err2 := hex.DecodeString(t.PolicyHash)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	tok := &Token{PCRs: t.PCRs, Bank: t.Bank, PrimaryAlg: t.PrimaryAlg, PolicyHash: policy, PIN: t.PIN}
	if tok.Bank == "" {
		tok.Bank = "sha256" // systemd before 250 wrote no bank
	}
	if tok.PrimaryAlg == "" {
		tok.PrimaryAlg = "ecc"
	}
	// The blob is TPM2B_PRIVATE then TPM2B_PUBLIC, each a 16-bit size
	// and that many bytes.
	for _, part := range []*[]byte{&tok.Private, &tok.Public} {
		if len(blob) < 2 || len(blob) < 2+int(binary.BigEndian.Uint16(blob)) {
			return nil, fmt.Errorf("%w: tpm2-blob is cut short", ErrBadToken)
		}
		n := 2 + int(binary.BigEndian.Uint16(blob))
		*part, blob = blob[:n], blob[n:]
	}
	for _, p := range tok.PCRs {
		if p < 0 || p > 23 {
			return nil, fmt.Errorf("%w: PCR %d", ErrBadToken, p)
		}
	}
	return tok, nil
}

// Passphrase unseals the token's secret in tpm and returns the keyslot
// passphrase systemd derives from it (its base64 text). pin is the TPM2
// PIN of a token enrolled with one (nil otherwise): systemd makes the
// SHA-256 of the PIN the sealed object's auth value, and asserts it in
// the policy (PolicyAuthValue).
func (t *Token) Passphrase(tpm transport.TPM, pin []byte) (*keyring.Secret, error) {
	if t.PIN && pin == nil {
		return nil, ErrPIN
	}
	bank, err := hashAlg(t.Bank)
	if err != nil {
		return nil, err
	}
	primary, err := createPrimary(tpm, t.PrimaryAlg)
	if err != nil {
		return nil, err
	}
	defer flush(tpm, primary.ObjectHandle)
	priv, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](t.Private)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	loaded, err := tpm2.Load{
		ParentHandle: tpm2.AuthHandle{Handle: primary.ObjectHandle, Name: primary.Name, Auth: tpm2.PasswordAuth(nil)},
		InPrivate:    *priv,
		InPublic:     tpm2.BytesAs2B[tpm2.TPMTPublic](t.Public[2:]),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("systemd-tpm2: loading the sealed object: %w", err)
	}
	defer flush(tpm, loaded.ObjectHandle)

	var opts []tpm2.AuthOption
	if t.PIN {
		auth := sha256.Sum256(pin)
		defer clear(auth[:])
		opts = append(opts, tpm2.Auth(auth[:]))
	}
	sess, closeSession, err := tpm2.PolicySession(tpm, tpm2.TPMAlgSHA256, 16, opts...)
	if err != nil {
		return nil, fmt.Errorf("systemd-tpm2: policy session: %w", err)
	}
	defer closeSession()
	// systemd asserts no PCRs by leaving PolicyPCR out (a zero policy).
	if len(t.PCRs) > 0 {
		if _, err := (tpm2.PolicyPCR{PolicySession: sess.Handle(), Pcrs: pcrSelection(bank, t.PCRs)}).Execute(tpm); err != nil {
			return nil, fmt.Errorf("systemd-tpm2: PolicyPCR: %w", err)
		}
	}
	if t.PIN {
		if _, err := (tpm2.PolicyAuthValue{PolicySession: sess.Handle()}).Execute(tpm); err != nil {
			return nil, fmt.Errorf("systemd-tpm2: PolicyAuthValue: %w", err)
		}
	}
	out, err := tpm2.Unseal{ItemHandle: tpm2.AuthHandle{Handle: loaded.ObjectHandle, Name: loaded.Name, Auth: sess}}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	secret := out.OutData.Buffer
	defer clear(secret)
	pass := make([]byte, base64.StdEncoding.EncodedLen(len(secret)))
	defer clear(pass)
	base64.StdEncoding.Encode(pass, secret)
	return keyring.FromBytes(pass)
}

func flush(tpm transport.TPM, h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tpm)
}

func hashAlg(bank string) (tpm2.TPMIAlgHash, error) {
	switch bank {
	case "sha256":
		return tpm2.TPMAlgSHA256, nil
	case "sha1":
		return tpm2.TPMAlgSHA1, nil
	}
	return 0, fmt.Errorf("%w: PCR bank %q", ErrBadToken, bank)
}

// pcrSelection selects pcrs of bank (a 3-byte bitmap, PCRs 0-23).
func pcrSelection(bank tpm2.TPMIAlgHash, pcrs []int) tpm2.TPMLPCRSelection {
	bits := make([]byte, 3)
	for _, p := range pcrs {
		bits[p/8] |= 1 << (p % 8)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{Hash: bank, PCRSelect: bits}}}
}
