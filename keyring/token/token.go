// Package token unlocks LUKS2 volumes with their tokens, as cryptsetup
// 2.6.1's library does (crypt_activate_by_token): it picks the tokens
// luks2 says may open the data segment, asks each type's handler for the
// keyslot passphrase and opens the token's keyslots with it. The
// handlers: luks2-keyring (cryptsetup's built-in one: a user key in the
// kernel keyring) and clevis (keyring/clevis), which cryptsetup would
// load as an external plugin.
package token

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/keyring/clevis"
	"github.com/luksd/luksd/keyring/tpm2"
	"github.com/luksd/luksd/keyring/vault"
	"github.com/luksd/luksd/luks2"
)

// The outcomes of a failed token unlock, cryptsetup's errnos, which its
// CLI reports and exits by.
var (
	// ErrNoToken (ENOENT): no token of the asked id or type can open the
	// volume, or none has a handler.
	ErrNoToken = errors.New("no usable token is available")
	// ErrWrongPassphrase (EPERM): a token's handler failed, or the
	// passphrase it gave opens none of its keyslots.
	ErrWrongPassphrase = errors.New("token cannot unlock assigned keyslot(s)")
	// ErrMissingResource (EAGAIN): a token needs something out of reach
	// now, such as its tang server.
	ErrMissingResource = errors.New("token requires additional missing resource")
	// ErrInvalidID (EINVAL): a token id outside -1..31.
	ErrInvalidID = errors.New("token id is invalid")
)

// Options select the tokens to try, as cryptsetup's --token-id,
// --token-type and --disable-external-tokens.
type Options struct {
	ID         int    // -1: any token
	Type       string // "": any type
	NoExternal bool   // only cryptsetup's built-in luks2-keyring type

	// Clevis reaches tang servers; the zero value gives up after 30 s.
	Clevis clevis.Decrypter
	// TPM2Device is the TPM systemd-tpm2 tokens unseal in (tpm2.Open's
	// syntax; "" is /dev/tpmrm0).
	TPM2Device string
	// PIN, when set, asks for the PIN of token id (a systemd-tpm2 token
	// enrolled with one); without it such tokens fail with tpm2.ErrPIN.
	PIN func(id int) (*keyring.Secret, error)
	// Warn, when set, receives one line for each token whose handler
	// failed for a reason worth telling (a tang server down, a tampered
	// JWE); cryptsetup's own built-in type says nothing.
	Warn func(string)
	// Keyslots, when set, opens the keyslots of attempt a with the
	// passphrase its token holds, in place of the header's UnlockToken
	// (a volume in reencryption opens both of its volume keys with it).
	Keyslots func(a luks2.TokenAttempt, pass []byte) (vk []byte, slot int, err error)
}

// A handler returns the keyslot passphrase token t holds.
type handler struct {
	open     func(ctx context.Context, o *Options, t luks2.Token) (*keyring.Secret, error)
	external bool // cryptsetup would need a plugin
	quiet    bool // its failures are not worth a line
}

var handlers = map[string]handler{
	"luks2-keyring": {open: openKeyring, quiet: true},
	"clevis": {open: func(ctx context.Context, o *Options, t luks2.Token) (*keyring.Secret, error) {
		return o.Clevis.TokenPassphrase(ctx, t.JSON)
	}, external: true},
	"systemd-tpm2": {open: openTPM2, external: true},
	"luksd-vault":  {open: openVault, external: true},
}

// unsupported are the token types cryptsetup hands to a plugin Debian
// installs (systemd's) that luksd has no code for: a hardware key each.
// luksd says so and goes on to the next token or the passphrase.
var unsupported = map[string]bool{"systemd-fido2": true, "systemd-pkcs11": true}

// Unlock opens h's data segment with its tokens, as cryptsetup 2.6.1
// does: in luks2.TokenAttempts' order, the first token that opens a
// keyslot wins. It returns the volume key, the keyslot and the token.
// When none opens, the error is the most telling of the failures, in
// cryptsetup's ranking: ErrWrongPassphrase, then ErrMissingResource,
// then ErrNoToken. Other errors (memory, reading dev) end the search.
func Unlock(ctx context.Context, h *luks2.Header, dev io.ReaderAt, o Options) (vk *keyring.Secret, slot, id int, err error) {
	if o.ID < -1 || o.ID >= luks2.MaxTokens {
		return nil, -1, -1, ErrInvalidID
	}
	res := ErrNoToken
	for _, a := range h.TokenAttempts(o.ID, o.Type) {
		vk, slot, err := o.try(ctx, h, dev, a)
		switch {
		case err == nil:
			return vk, slot, a.ID, nil
		case errors.Is(err, ErrWrongPassphrase):
			res = err
		case errors.Is(err, ErrMissingResource):
			if !errors.Is(res, ErrWrongPassphrase) {
				res = err
			}
		case errors.Is(err, ErrNoToken):
		default:
			return nil, -1, -1, err
		}
	}
	return nil, -1, -1, res
}

// try runs token attempt a: its handler, then its keyslots.
func (o *Options) try(ctx context.Context, h *luks2.Header, dev io.ReaderAt, a luks2.TokenAttempt) (*keyring.Secret, int, error) {
	hd, ok := handlers[a.Type]
	if !ok && unsupported[a.Type] && !o.NoExternal && o.Warn != nil {
		o.Warn(fmt.Sprintf("Token %d (%s): token type not supported by luksd", a.ID, a.Type))
	}
	if !ok || hd.external && o.NoExternal {
		return nil, -1, ErrNoToken
	}
	pass, err := hd.open(ctx, o, a.Token)
	if err != nil {
		if errors.Is(err, keyring.ErrNoMemory) {
			return nil, -1, err
		}
		if !hd.quiet && o.Warn != nil {
			o.Warn(fmt.Sprintf("Token %d (%s): %s", a.ID, a.Type, strings.TrimPrefix(err.Error(), a.Type+": ")))
		}
		var srv *clevis.ServerError
		var vs *vault.ServerError
		if errors.As(err, &srv) || errors.As(err, &vs) || errors.Is(err, tpm2.ErrNoDevice) {
			return nil, -1, fmt.Errorf("%w: %w", ErrMissingResource, err)
		}
		return nil, -1, fmt.Errorf("%w: %w", ErrWrongPassphrase, err)
	}
	defer pass.Wipe()
	unlock := func(a luks2.TokenAttempt, pass []byte) ([]byte, int, error) { return h.UnlockToken(dev, a, pass) }
	if o.Keyslots != nil {
		unlock = o.Keyslots
	}
	vk, slot, err := unlock(a, pass.Bytes())
	if errors.Is(err, luks2.ErrWrongPassphrase) {
		return nil, -1, fmt.Errorf("%w: %w", ErrWrongPassphrase, err)
	}
	if err != nil {
		return nil, -1, err
	}
	key, err := keyring.FromBytes(vk)
	return key, slot, err
}

// openKeyring is the luks2-keyring handler: the passphrase is the user
// key named by the token's key_description.
func openKeyring(_ context.Context, _ *Options, t luks2.Token) (*keyring.Secret, error) {
	desc, err := t.KeyDescription()
	if err != nil {
		return nil, err
	}
	return keyring.FromKernel(desc)
}

// openTPM2 is the systemd-tpm2 handler: the passphrase is the base64 text
// of the secret the TPM unseals.
func openTPM2(_ context.Context, o *Options, t luks2.Token) (*keyring.Secret, error) {
	tok, err := tpm2.ParseToken(t.JSON)
	if err != nil {
		return nil, err
	}
	tpm, err := tpm2.Open(o.TPM2Device)
	if err != nil {
		return nil, err
	}
	defer tpm.Close()
	var pin []byte
	if tok.PIN {
		if o.PIN == nil {
			return nil, tpm2.ErrPIN
		}
		p, err := o.PIN(t.ID)
		if err != nil {
			return nil, err
		}
		defer p.Wipe()
		pin = p.Bytes()
	}
	return tok.Passphrase(tpm, pin)
}

// openVault is the luksd-vault handler: {"type":"luksd-vault",
// "keyslots":[...],"vault-location":"vault:PATH[?...]"}, the passphrase
// read from Vault with the client certificate (keyring/vault).
func openVault(ctx context.Context, _ *Options, t luks2.Token) (*keyring.Secret, error) {
	var tok struct {
		Location string `json:"vault-location"`
	}
	if err := json.Unmarshal(t.JSON, &tok); err != nil {
		return nil, fmt.Errorf("luksd-vault: %w", err)
	}
	l, err := vault.ParseLocation(tok.Location)
	if err != nil {
		return nil, err
	}
	return l.Read(ctx)
}
