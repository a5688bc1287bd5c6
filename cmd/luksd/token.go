package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// token is cryptsetup 2.6.1's `token` action on LUKS2 headers: add (a
// luks2-keyring token), import, export, remove and unassign. Messages,
// exit codes and the number of header writes (luksDump's Epoch) are
// cryptsetup's.

func init() {
	register(&cli.Command{
		Name:      "token",
		Usage:     "manipulate LUKS2 tokens: add, import, export, remove, unassign",
		ArgsUsage: "<add|remove|import|export|unassign> <device>",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key-description", Usage: "kernel keyring `DESCRIPTION` of a luks2-keyring token (add)"},
			&cli.IntFlag{Name: "token-id", Value: -1, Usage: "token `NUM` (default: first free)"},
			&cli.IntFlag{Name: "key-slot", Aliases: []string{"S"}, Value: -1, Usage: "keyslot `NUM` to assign the token to (default: all, for add)"},
			&cli.StringFlag{Name: "json-file", Usage: "token JSON `FILE` to import or export (- or none: standard input/output)"},
			&cli.BoolFlag{Name: "token-replace", Usage: "replace the token at --token-id"},
			&cli.BoolFlag{Name: "unbound", Usage: "add the token unassigned to any keyslot"},
			headerFlag,
		},
		Action: tokenAction,
	})
}

func tokenAction(c *cli.Context) error {
	sub, dev := c.Args().Get(0), c.Args().Get(1)
	id, slot := c.Int("token-id"), c.Int("key-slot")
	switch sub {
	case "add", "remove", "import", "export", "unassign":
	default:
		return usageErrorf("Invalid token action.")
	}
	switch {
	case sub == "add" && c.String("key-description") == "":
		return usageErrorf("--key-description parameter is mandatory for token add action.")
	case (sub == "remove" || sub == "export") && id == -1:
		return usageErrorf("Action requires specific token. Use --token-id parameter.")
	case sub == "unassign" && slot == -1:
		return usageErrorf("Action requires specific keyslot. Use --key-slot parameter.")
	case c.Bool("unbound") && sub != "add":
		return usageErrorf("Option --unbound is valid only with token add action.")
	case c.Bool("unbound") && c.IsSet("key-slot"):
		return usageErrorf("Options --key-slot and --unbound cannot be combined.")
	}
	h, f, err := readLUKS2Header(c, dev, sub != "export")
	if err != nil {
		return err
	}
	defer f.Close()
	if sub == "export" {
		return tokenExport(h, id, c.String("json-file"))
	}
	var js []byte
	if sub == "import" {
		if js, err = readTokenJSON(c.String("json-file")); err != nil {
			return err
		}
	}
	return f.edit(func() error { return tokenEdit(c, h, f, sub, js) })
}

// tokenEdit runs token add, import, remove or unassign on h.
func tokenEdit(c *cli.Context, h *luks2.Header, f *headerDevice, sub string, js []byte) error {
	id, slot := c.Int("token-id"), c.Int("key-slot")
	switch sub {
	case "add":
		return tokenCreate(c, h, f, luks2.KeyringTokenJSON(c.String("key-description")), "add")
	case "import":
		return tokenCreate(c, h, f, js, "import")
	case "remove":
		err := h.RemoveToken(f, id)
		switch {
		case errors.Is(err, luks2.ErrTokenInvalid):
			return exitf(exitParams, "Token %d is invalid.", id)
		case errors.Is(err, luks2.ErrTokenNotInUse):
			return exitf(exitParams, "Token %d is not in use.", id)
		case err != nil:
			return headerError(f.Path, err)
		}
		if verboseFlag {
			fmt.Printf("Token %d removed.\n", id)
		}
	case "unassign":
		err := h.UnassignToken(f, id, slot)
		switch {
		case errors.Is(err, luks2.ErrTokenNotAssigned):
			return exitf(exitParams, "Token %d is not assigned to keyslot %d.", id, slot)
		case errors.Is(err, luks2.ErrConcurrentUpdate):
			return headerError(f.Path, err)
		case err != nil:
			return exitf(exitParams, "Failed to unassign token %d from keyslot %d.", id, slot)
		}
	}
	return nil
}

// tokenCreate stores js (token add or import) and assigns the keyslot as
// cryptsetup does: add assigns every active keyslot unless --key-slot or
// --unbound says otherwise, import only --key-slot; a failed assignment
// removes the new token again.
func tokenCreate(c *cli.Context, h *luks2.Header, f *headerDevice, js []byte, sub string) error {
	id, slot := c.Int("token-id"), c.Int("key-slot")
	if h.KeyslotStatus(slot) == luks2.KeyslotInactive {
		return exitf(exitParams, "Keyslot %d is not active.", slot)
	}
	tok, err := h.SetToken(f, id, js, c.Bool("token-replace"))
	if isRequirementsError(err) {
		// cryptsetup says why, then that the token failed.
		fmt.Fprintln(os.Stderr, headerError(f.Path, err))
	}
	switch {
	case errors.Is(err, luks2.ErrConcurrentUpdate):
		return headerError(f.Path, err)
	case errors.Is(err, luks2.ErrTokenInvalid):
		return exitf(exitParams, "Token %d is invalid.", id)
	case errors.Is(err, luks2.ErrTokenInUse):
		return exitf(exitParams, "Token %d in use.", id)
	case err != nil && sub == "add":
		return exitf(exitParams, "Failed to add luks2-keyring token %d.", id)
	case err != nil:
		return exitf(exitParams, "Failed to import token from file.")
	}
	if sub == "add" && !c.Bool("unbound") || slot != -1 {
		if err := h.AssignToken(f, tok, slot); err != nil {
			// cryptsetup drops the token it could not assign.
			_ = h.RemoveToken(f, tok)
			return exitf(exitParams, "Failed to assign token %d to keyslot %d.", tok, slot)
		}
	}
	if verboseFlag {
		fmt.Printf("Token %d created.\n", tok)
	}
	return nil
}

// readTokenJSON reads token import's JSON from path, or standard input
// for "" and "-".
func readTokenJSON(path string) ([]byte, error) {
	in := os.Stdin
	if path != "" && path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, exitf(exitParams, "Failed to open file %s in read-only mode.", path)
		}
		defer f.Close()
		in = f
	}
	js, err := io.ReadAll(io.LimitReader(in, luks2.MaxTokenSize))
	if err != nil {
		return nil, exitf(exitParams, "Failed to import token from file.")
	}
	return js, nil
}

// tokenExport prints token id, or writes it to path (mode 0600), with no
// trailing newline, as cryptsetup does.
func tokenExport(h *luks2.Header, id int, path string) error {
	js, err := h.Token(id)
	if err != nil {
		return exitf(exitParams, "Failed to get token %d for export.", id)
	}
	if path == "" || path == "-" {
		_, err = os.Stdout.Write(js)
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return exitf(exitParams, "Failed to open file %s in write mode.", path)
	}
	if _, err := f.Write(js); err != nil {
		f.Close()
		return exitf(exitParams, "Failed to write to file %s.", path)
	}
	return f.Close()
}

// isRequirementsError reports whether err is a refusal for the header's
// mandatory requirements.
func isRequirementsError(err error) bool {
	return errors.Is(err, luks2.ErrUnmetRequirements) || errors.Is(err, luks2.ErrReencryption) ||
		errors.Is(err, luks2.ErrLegacyReencryption)
}
