package luks2

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// attemptsOf renders TokenAttempts as "id/priority" items.
func attemptsOf(h *Header, id int, typ string) string {
	var s []string
	for _, a := range h.TokenAttempts(id, typ) {
		s = append(s, fmt.Sprintf("%d/%d", a.ID, a.Priority))
	}
	return fmt.Sprint(s)
}

// TokenAttempts follows cryptsetup 2.6.1: preferred keyslots' tokens
// first, then normal ones, each in id order; a named token for any
// priority; tokens of other types or without a usable keyslot left out.
func TestTokenAttemptsOrder(t *testing.T) {
	h, f, _ := formatTokenTest(t)
	set := func(id int, js string) {
		t.Helper()
		if _, err := h.SetToken(f, id, []byte(js), false); err != nil {
			t.Fatal(err)
		}
	}
	set(1, `{"type":"luks2-keyring","keyslots":["0"],"key_description":"a"}`)
	set(2, `{"type":"clevis","keyslots":["3"],"jwe":{}}`)
	set(4, `{"type":"clevis","keyslots":[]}`)
	if err := h.SetPriority(f, 3, PriorityPrefer); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int
		typ  string
		want string
	}{
		{-1, "", "[2/2 1/1]"},
		{-1, "luks2-keyring", "[1/1]"},
		{-1, "other", "[]"},
		{1, "", "[1/0]"},
		{2, "luks2-keyring", "[]"},
		{4, "", "[]"},
		{7, "", "[]"},
	} {
		if got := attemptsOf(h, c.id, c.typ); got != c.want {
			t.Errorf("TokenAttempts(%d, %q) = %s, want %s", c.id, c.typ, got, c.want)
		}
	}
	if err := h.SetPriority(f, 0, PriorityIgnore); err != nil {
		t.Fatal(err)
	}
	if got := attemptsOf(h, -1, ""); got != "[2/2]" {
		t.Errorf("with keyslot 0 ignored: %s, want [2/2]", got)
	}
	if got := attemptsOf(h, 1, ""); got != "[1/0]" {
		t.Errorf("named token of an ignored keyslot: %s, want [1/0]", got)
	}
}

// UnlockToken opens only the token's own keyslots, with the token's
// passphrase, and gives the volume key Unlock gives.
func TestUnlockToken(t *testing.T) {
	h, f, _ := formatTokenTest(t)
	if _, err := h.SetToken(f, 0, []byte(`{"type":"x","keyslots":["3"]}`), false); err != nil {
		t.Fatal(err)
	}
	a := h.TokenAttempts(0, "")
	if len(a) != 1 {
		t.Fatalf("attempts %v", a)
	}
	vk, slot, err := h.UnlockToken(f, a[0], []byte("token"))
	if err != nil || slot != 3 {
		t.Fatalf("slot %d, %v", slot, err)
	}
	want, _, err := h.Unlock(f, []byte("token"), 0)
	if err != nil || !bytes.Equal(vk, want) {
		t.Fatalf("token key differs from keyslot 0's (%v)", err)
	}
	if _, _, err := h.UnlockToken(f, a[0], []byte("wrong")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	tok := h.TokenAttempts(-1, "")[0].Token
	if _, err := tok.KeyDescription(); !errors.Is(err, ErrBadToken) {
		t.Fatalf("KeyDescription of a non-keyring token: %v", err)
	}
}
