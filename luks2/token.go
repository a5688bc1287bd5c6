package luks2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LUKS2 tokens, as cryptsetup 2.6.1's `token` action edits them: a token
// is a JSON object with a string "type" and a "keyslots" array naming
// existing keyslots; the header keeps it verbatim (json-c's form).

var (
	// ErrTokenInvalid: a token id outside 0..31 ("Token N is invalid.").
	ErrTokenInvalid = errors.New("token id is invalid")
	// ErrTokenInUse: the id is taken and replacing was not asked for.
	ErrTokenInUse = errors.New("token is in use")
	// ErrTokenNotInUse: no token has the id.
	ErrTokenNotInUse = errors.New("token is not in use")
	// ErrTokenNotAssigned: the token does not name the keyslot.
	ErrTokenNotAssigned = errors.New("token is not assigned to the keyslot")
	// ErrBadToken: token JSON cryptsetup would refuse to import.
	ErrBadToken = errors.New("invalid token JSON")
	// ErrNoFreeToken: all 32 token ids are taken.
	ErrNoFreeToken = errors.New("no free token id")
)

// MaxTokenSize bounds the token JSON worth reading: no token is larger
// than the largest LUKS2 metadata area.
const MaxTokenSize = maxHdrSize

// keyringTokenType is cryptsetup's one built-in token type; other types
// starting with the built-in prefix are refused.
const (
	keyringTokenType   = "luks2-keyring"
	builtinTokenPrefix = "luks2-"
)

// KeyringTokenJSON returns the luks2-keyring token cryptsetup's `token add
// --key-description` creates (before keyslots are assigned). cryptsetup
// pastes the description in without escaping it, so a quote or backslash
// in it makes JSON that SetToken refuses or reads otherwise, as
// cryptsetup's own parser does.
func KeyringTokenJSON(description string) []byte {
	return []byte(`{"type":"` + keyringTokenType + `","keyslots":[],"key_description":"` + description + `"}`)
}

// Tokens returns the ids of the tokens in use, ascending (nil for LUKS1).
func (h *Header) Tokens() []int {
	if v2, ok := h.v2(); ok {
		return sortedIDs(v2.meta.tokens)
	}
	return nil
}

// Token returns token id as `cryptsetup token export` prints it: json-c's
// compact form, no newline. ErrTokenNotInUse when there is none.
func (h *Header) Token(id int) ([]byte, error) {
	v2, err := h.tokenHeader()
	if err != nil {
		return nil, err
	}
	t := v2.meta.tokens[id]
	if t == nil {
		return nil, ErrTokenNotInUse
	}
	return t.compact(), nil
}

// SetToken stores token js under id (-1: the first free id), validated as
// cryptsetup's token import validates it: one JSON object with a string
// "type" and a "keyslots" array of existing keyslots' ids, no unknown
// "luks2-" type, and a string key_description for luks2-keyring. A token
// already at id is replaced only when replace is set, in its place. It
// returns the id and writes the header once.
func (h *Header) SetToken(dev Device, id int, js []byte, replace bool) (int, error) {
	v2, err := h.tokenEdit()
	if err != nil {
		return -1, err
	}
	m := v2.meta
	switch {
	case id < -1 || id >= maxTokens:
		return -1, ErrTokenInvalid
	case id == -1:
		for id = 0; id < maxTokens && m.tokens[id] != nil; id++ {
		}
		if id == maxTokens {
			return -1, ErrNoFreeToken
		}
	case m.tokens[id] != nil && !replace:
		return -1, ErrTokenInUse
	}
	t, err := parseToken(js, m)
	if err != nil {
		return -1, err
	}
	root := m.root.clone()
	root.get("tokens").set(strconv.Itoa(id), t)
	if err := v2.replace(dev, root); err != nil {
		return -1, err
	}
	return id, nil
}

// RemoveToken deletes token id (one header write).
func (h *Header) RemoveToken(dev Device, id int) error {
	v2, err := h.tokenEdit()
	if err != nil {
		return err
	}
	if id < 0 || id >= maxTokens {
		return ErrTokenInvalid
	}
	if v2.meta.tokens[id] == nil {
		return ErrTokenNotInUse
	}
	root := v2.meta.root.clone()
	root.get("tokens").del(strconv.Itoa(id))
	return v2.replace(dev, root)
}

// AssignToken adds keyslot slot (-1: every active keyslot, in the metadata's order) to
// token id's keyslots, leaving ids it already names; it writes the header
// once even when nothing changes, as cryptsetup does.
func (h *Header) AssignToken(dev Device, id, slot int) error {
	v2, err := h.tokenEdit()
	if err != nil {
		return err
	}
	m := v2.meta
	if id < 0 || id >= maxTokens {
		return ErrTokenInvalid
	}
	if m.tokens[id] == nil {
		return ErrTokenNotInUse
	}
	slots := []string{strconv.Itoa(slot)}
	if slot == -1 {
		// In the metadata's order, as cryptsetup walks the keyslots.
		slots = m.root.get("keyslots").keys
	} else if !v2.keyslotStatus(slot).InUse() {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	root := m.root.clone()
	arr := root.get("tokens").get(strconv.Itoa(id)).get("keyslots")
	for _, s := range slots {
		if !arrayHolds(arr, s) {
			arr.push(jString(s))
		}
	}
	return v2.replace(dev, root)
}

// UnassignToken removes keyslot slot from token id's keyslots (one header
// write); ErrTokenNotAssigned when the token does not name it.
func (h *Header) UnassignToken(dev Device, id, slot int) error {
	v2, err := h.tokenEdit()
	if err != nil {
		return err
	}
	if id < 0 || id >= maxTokens || slot < 0 || slot >= maxKeyslots {
		return ErrTokenInvalid
	}
	m := v2.meta
	t := m.tokens[id]
	key := strconv.Itoa(slot)
	if t == nil || !arrayHolds(t.get("keyslots"), key) {
		return ErrTokenNotAssigned
	}
	root := m.root.clone()
	arr := root.get("tokens").get(strconv.Itoa(id)).get("keyslots")
	kept := arr.vals[:0]
	for _, v := range arr.vals {
		if v.str != key {
			kept = append(kept, v)
		}
	}
	arr.vals = kept
	return v2.replace(dev, root)
}

var errLUKS1Tokens = fmt.Errorf("%w: LUKS1 headers have no tokens", ErrUnsupported)

// tokenHeader returns the LUKS2 header whose tokens h reads.
func (h *Header) tokenHeader() (*header, error) {
	v2, ok := h.v2()
	if !ok {
		return nil, errLUKS1Tokens
	}
	return v2, nil
}

// tokenEdit returns the LUKS2 header whose tokens h edits, when its
// requirements allow it.
func (h *Header) tokenEdit() (*header, error) {
	v2, err := h.tokenHeader()
	if err != nil {
		return nil, err
	}
	if err := v2.requirementsMet(); err != nil {
		return nil, err
	}
	return v2, nil
}

func arrayHolds(arr *node, s string) bool {
	for _, v := range arr.vals {
		if v.kind == kindString && v.str == s {
			return true
		}
	}
	return false
}

// parseToken reads token JSON as json-c's tokener does (the first value;
// what follows it is ignored) and validates it against m.
func parseToken(js []byte, m *metadata) (*node, error) {
	// At its place in the header (root, tokens, token), so that no token
	// nests the header deeper than json-c reads.
	t, _, err := parseJSONC(js, 2)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if t.kind != kindObject {
		return nil, fmt.Errorf("%w: not an object", ErrBadToken)
	}
	// cryptsetup's LUKS2_token_validate.
	if containsString(t, "type") == nil {
		return nil, fmt.Errorf("%w: no type string", ErrBadToken)
	}
	if arr := contains(t, "keyslots", kindArray); arr == nil || !keyslotsNamed(arr, m.root.get("keyslots")) {
		return nil, fmt.Errorf("%w: keyslots does not name active keyslots", ErrBadToken)
	}
	typ := cstr(t.get("type").str)
	if strings.HasPrefix(typ, builtinTokenPrefix) {
		if typ != keyringTokenType {
			return nil, fmt.Errorf("%w: unknown built-in token type %q", ErrBadToken, typ)
		}
		if d := t.get("key_description"); d == nil || d.kind != kindString {
			return nil, fmt.Errorf("%w: luks2-keyring token without a key_description string", ErrBadToken)
		}
	}
	return t, nil
}
