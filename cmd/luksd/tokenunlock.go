package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/keyring/token"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// tokenFlags select the LUKS2 tokens a verb unlocks with, as cryptsetup
// 2.6.1's options.
var tokenFlags = []cli.Flag{
	&cli.BoolFlag{Name: "token-only", Usage: "unlock with tokens only, never ask for a passphrase"},
	&cli.IntFlag{Name: "token-id", Value: -1, Usage: "unlock with token `NUM` only"},
	&cli.StringFlag{Name: "token-type", Usage: "unlock with tokens of `TYPE` only"},
	&cli.BoolFlag{Name: "disable-external-tokens", Usage: "only cryptsetup's built-in luks2-keyring tokens"},
	&cli.StringFlag{Name: "tpm2-device", Usage: "the TPM systemd-tpm2 tokens unseal in: a `PATH` (default /dev/tpmrm0) or swtpm:host=H,port=P"},
}

// tokensAsked reports whether the command line names tokens: the verbs
// that try tokens only when asked (luksAddKey, and luksDump
// --dump-volume-key, which cryptsetup 2.6.1 never unlocks by token) look.
func tokensAsked(c *cli.Context) bool {
	return c.Bool("token-only") || c.IsSet("token-id") || c.IsSet("token-type")
}

// unlockByToken tries h's tokens as cryptsetup's CLI does before it asks
// for a passphrase. It returns the volume key and keyslot when a token
// opened one; nil and no error when the caller goes on to the passphrase
// (fallThrough, without --token-only); else the error to stop with, in
// cryptsetup's exit codes. With -v it says why no token opened, in
// cryptsetup's words.
func unlockByToken(c *cli.Context, h *luks2.Header, dev io.ReaderAt, fallThrough bool) (*keyring.Secret, int, error) {
	return unlockByTokenWith(c, h, dev, fallThrough, nil)
}

// unlockByTokenWith is unlockByToken with the keyslots opened by
// keyslots (token.Options.Keyslots; nil: the header's own way).
func unlockByTokenWith(c *cli.Context, h *luks2.Header, dev io.ReaderAt, fallThrough bool,
	keyslots func(a luks2.TokenAttempt, pass []byte) ([]byte, int, error)) (*keyring.Secret, int, error) {
	fallThrough = fallThrough && !c.Bool("token-only")
	if h.Version() != 2 {
		// LUKS1 has no tokens: cryptsetup's library refuses (EINVAL)
		// without a word.
		if fallThrough {
			return nil, -1, nil
		}
		return nil, -1, exitf(exitParams, "")
	}
	opts := token.Options{
		ID:         c.Int("token-id"),
		Type:       c.String("token-type"),
		NoExternal: c.Bool("disable-external-tokens"),
		TPM2Device: c.String("tpm2-device"),
		PIN:        tokenPIN(c),
		Warn:       func(line string) { fmt.Fprintln(os.Stderr, line) },
		Keyslots:   keyslots,
	}
	if !c.IsSet("token-id") {
		opts.ID = -1
	}
	vk, slot, _, err := token.Unlock(context.Background(), h, dev, opts)
	if err == nil {
		return vk, slot, nil
	}
	if msg := tokenErrorMessage(err, opts); msg != "" {
		verbosef(c, "%s", msg)
	}
	if fallThrough {
		return nil, -1, nil
	}
	switch {
	case errors.Is(err, token.ErrWrongPassphrase):
		return nil, -1, exitf(exitPermission, "")
	case errors.Is(err, token.ErrNoToken), errors.Is(err, token.ErrMissingResource), errors.Is(err, token.ErrInvalidID):
		return nil, -1, exitf(exitParams, "")
	}
	return nil, -1, headerError(headerPath(c, ""), err)
}

// tokenErrorMessage is cryptsetup's tools_token_error_msg: what -v says
// about a failed token unlock (nothing when neither an id nor a type was
// asked for and a token failed).
func tokenErrorMessage(err error, o token.Options) string {
	which := ""
	switch {
	case o.ID >= 0:
		which = fmt.Sprintf("Token %d", o.ID)
	case o.Type != "":
		which = fmt.Sprintf("Token (type %s)", o.Type)
	}
	switch {
	case errors.Is(err, token.ErrNoToken) && o.Type != "":
		return fmt.Sprintf("No usable token (type %s) is available.", o.Type)
	case errors.Is(err, token.ErrNoToken):
		return "No usable token is available."
	case which == "":
		return ""
	case errors.Is(err, token.ErrWrongPassphrase):
		return which + " cannot unlock assigned keyslot(s) (wrong keyslot passphrase)."
	case errors.Is(err, token.ErrMissingResource):
		return which + " requires additional missing resource."
	}
	return ""
}

// unlockHeaderKey opens h with a token or a passphrase. Open-like verbs
// (retry) try the tokens first and fall through to the passphrase, as
// cryptsetup's open; the others (luksDump --dump-volume-key) use tokens
// only when the command line names them, and then only them.
func unlockHeaderKey(c *cli.Context, path string, h *luks2.Header, f io.ReaderAt, slot int, retry bool) (*keyring.Secret, int, error) {
	if retry || tokensAsked(c) {
		key, got, err := unlockByToken(c, h, f, retry)
		if err != nil || key != nil {
			return key, got, err
		}
	}
	return unlockWith(c, h, f, keySource(c), fmt.Sprintf("Enter passphrase for %s: ", path), slot, retry)
}

// tokenPIN asks for a token's PIN on the terminal, as cryptsetup does
// for a plugin that needs one; without a terminal there is no PIN and
// such tokens fail.
func tokenPIN(c *cli.Context) func(id int) (*keyring.Secret, error) {
	src := keyring.Source{}
	if !src.Interactive() {
		return nil
	}
	return func(id int) (*keyring.Secret, error) {
		prompt := "Enter token PIN: "
		if c.IsSet("token-id") {
			prompt = fmt.Sprintf("Enter token %d PIN: ", id)
		}
		return src.Passphrase(prompt, false)
	}
}
