package main

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// The Vitastor model: a per-volume key in Vault (KV v1, hex), read after
// a certificate login, is the passphrase of a keyslot. --key-source
// reads it for luksFormat and for unlocking; a luksd-vault token reads
// it unattended; Vault out of reach is one line, then the passphrase.
func TestVaultKeySourceAndToken(t *testing.T) {
	w := newWorkspace(t)
	key := []byte{0x00, 0x11, 0x0a, 0x33, 0xff, 0x10, 0x20}
	testtool.Vault(t, "luksd-host", map[string]map[string]string{"secret/pool/disk3": {"key": hex.EncodeToString(key)}})
	keyFile := w.key("vault.key", string(key))
	const src = "vault:secret/pool/disk3"

	// luksd formats with the key from Vault; cryptsetup opens with it.
	img := w.image("vault.img")
	w.luksd(nil, append([]string{"luksFormat", "-q", "--key-source", src, img}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, "open", "--test-passphrase", "-d", keyFile, img).ok(t)

	// cryptsetup formats with the key; luksd opens by --key-source.
	img2 := w.image("vault2.img")
	testtool.CryptsetupFormat(t, img2, keyFile)
	r := w.luksd(nil, "open", "--test-passphrase", "-v", "--key-source", src, img2).ok(t)
	if !strings.Contains(r.stdout, "Key slot 0 unlocked.") {
		t.Fatalf("--key-source: %q", r.stdout)
	}
	w.luksd(nil, "open", "--test-passphrase", "--key-source", "vault:secret/pool/disk9", img2).expect(t, 1, "vault: the secret holds no key")

	// A luksd-vault token opens keyslot 0 unattended.
	w.cs(nil, "token", "import", "--json-file", w.key("tok.json", `{"type":"luksd-vault","keyslots":["0"],"vault-location":"`+src+`"}`), img2).ok(t)
	r = w.luksd(nil, "open", "--test-passphrase", "-v", "--token-only", img2).ok(t)
	if firstLine(r.stdout) != "Key slot 0 unlocked." {
		t.Fatalf("luksd-vault token: %q", r.stdout)
	}
	t.Setenv("VAULT_ADDR", "https://127.0.0.1:1")
	r = w.luksd(nil, "open", "--test-passphrase", "-d", keyFile, img2)
	r.expect(t, 0, "")
	if !strings.HasPrefix(r.stderr, "Token 0 (luksd-vault): vault https://127.0.0.1:1: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("Vault down: stderr %q, want one line naming it", r.stderr)
	}
}
