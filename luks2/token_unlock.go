package luks2

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxTokens is the number of LUKS2 token ids (0..31).
const MaxTokens = maxTokens

// A Token is a LUKS2 token as unlocking reads it.
type Token struct {
	ID       int
	Type     string
	Keyslots []int  // the keyslots it names, in its order
	JSON     []byte // the token, in json-c's compact form
}

// KeyDescription returns a luks2-keyring token's key_description.
func (t Token) KeyDescription() (string, error) {
	n, _, err := parseJSONC(t.JSON, 2)
	if err == nil {
		if d := containsString(n, "key_description"); d != nil {
			return cstr(d.str), nil
		}
	}
	return "", fmt.Errorf("%w: token %d has no key_description string", ErrBadToken, t.ID)
}

// A TokenAttempt is one try of a token: its passphrase may open those of
// its keyslots that have Priority (PriorityIgnore: any priority).
type TokenAttempt struct {
	Token
	Priority Priority
}

// TokenAttempts lists, in cryptsetup 2.6.1's order, the tries of tokens
// that can unlock the data segment: with id >= 0 that token alone, for
// keyslots of any priority; else every token in id order, a pass for
// preferred keyslots and then one for normal ones. typ ("" = any)
// restricts the token type. A token naming no keyslot bound to the data
// segment, of the pass's priority, is left out, as cryptsetup skips it
// before its handler runs. LUKS1 has no tokens.
func (h *Header) TokenAttempts(id int, typ string) []TokenAttempt {
	v2, ok := h.v2()
	if !ok {
		return nil
	}
	var ids []int
	passes := []Priority{PriorityPrefer, PriorityNormal}
	if id >= 0 {
		ids, passes = []int{id}, []Priority{PriorityIgnore}
	} else {
		ids = sortedIDs(v2.meta.tokens)
	}
	var tries []TokenAttempt
	for _, p := range passes {
		for _, id := range ids {
			t, ok := v2.token(id)
			if !ok || typ != "" && t.Type != typ || len(v2.tokenKeyslots(t, p)) == 0 {
				continue
			}
			tries = append(tries, TokenAttempt{Token: t, Priority: p})
		}
	}
	return tries
}

// UnlockToken opens with passphrase, the secret a token gave, the first
// keyslot of the try that opens, in the token's order. It returns the
// volume key and the keyslot; ErrWrongPassphrase when none opens.
func (h *Header) UnlockToken(dev io.ReaderAt, a TokenAttempt, passphrase []byte) ([]byte, int, error) {
	v2, ok := h.v2()
	if !ok {
		return nil, -1, errLUKS1Tokens
	}
	t, ok := v2.token(a.ID)
	if !ok {
		return nil, -1, ErrTokenNotInUse
	}
	for _, slot := range v2.tokenKeyslots(t, a.Priority) {
		vk, err := v2.openAndVerify(dev, slot, nil, passphrase)
		switch {
		case err == nil:
			return vk, slot, nil
		case !errors.Is(err, ErrWrongPassphrase) && !errors.Is(err, errKeyslotUnusable):
			return nil, -1, err
		}
	}
	return nil, -1, ErrWrongPassphrase
}

// token returns token id.
func (h *header) token(id int) (Token, bool) {
	n := h.meta.tokens[id]
	if n == nil {
		return Token{}, false
	}
	t := Token{ID: id, JSON: n.compact(), Keyslots: addressableRefs(n.get("keyslots"))}
	if typ := containsString(n, "type"); typ != nil {
		t.Type = cstr(typ.str)
	}
	return t, true
}

// tokenKeyslots returns the keyslots of t that hold the data segment's
// key and have priority p (PriorityIgnore: any), in t's order.
func (h *header) tokenKeyslots(t Token, p Priority) []int {
	seg, err := h.meta.dataSegment()
	if err != nil {
		return nil
	}
	d := h.meta.segmentDigest(seg.id)
	var slots []int
	for _, id := range t.Keyslots {
		k := h.meta.keyslots[id]
		if k == nil || k.typ != "luks2" || d == nil || h.meta.keyslotDigest(id) != d {
			continue
		}
		if p == PriorityIgnore || Priority(k.priority) == p {
			if !slices.Contains(slots, id) {
				slots = append(slots, id)
			}
		}
	}
	return slots
}
