package luks2

import (
	"errors"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// formatTokenTest formats a LUKS2 image with keyslots 0 and 3 and returns
// its header and device.
func formatTokenTest(t *testing.T) (*Header, fileDev, string) {
	t.Helper()
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	pass := []byte("token")
	h, vk, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2, Keyslot: 0}, pass)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.AddKey(f, vk, pass, 3, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	return h, f, img
}

func TestTokenEdits(t *testing.T) {
	h, f, img := formatTokenTest(t)
	id, err := h.SetToken(f, -1, KeyringTokenJSON("desc"), false)
	if err != nil || id != 0 {
		t.Fatalf("SetToken: id %d, %v", id, err)
	}
	if err := h.AssignToken(f, id, -1); err != nil {
		t.Fatal(err)
	}
	if id, err := h.SetToken(f, 5, []byte(`{"type":"x","keyslots":["3"],"n":-0,"u":18446744073709551616,"m":-9223372036854775809,"f":1.50}`), false); err != nil || id != 5 {
		t.Fatalf("SetToken 5: id %d, %v", id, err)
	}
	if id, err := h.SetToken(f, -1, []byte(`{"type":"y","keyslots":[]}`), false); err != nil || id != 1 {
		t.Fatalf("SetToken any: id %d, %v (want the first free id 1)", id, err)
	}
	if err := h.UnassignToken(f, 0, 3); err != nil {
		t.Fatal(err)
	}
	// What was written is what a fresh read finds.
	h2, _ := readHdr(t, img)
	want := map[int]string{
		0: `{"type":"luks2-keyring","keyslots":["0"],"key_description":"desc"}`,
		1: `{"type":"y","keyslots":[]}`,
		5: `{"type":"x","keyslots":["3"],"n":0,"u":18446744073709551615,"m":-9223372036854775808,"f":1.50}`,
	}
	for _, hdr := range []*Header{h, h2} {
		if got := hdr.Tokens(); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 5 {
			t.Fatalf("Tokens() = %v", got)
		}
		for id, js := range want {
			if got, err := hdr.Token(id); err != nil || string(got) != js {
				t.Fatalf("token %d: %s, %v; want %s", id, got, err, js)
			}
		}
	}
	// Killing a keyslot takes it out of the tokens.
	if err := h.KillSlot(f, 3); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.Token(5); string(got) != `{"type":"x","keyslots":[],"n":0,"u":18446744073709551615,"m":-9223372036854775808,"f":1.50}` {
		t.Fatalf("after KillSlot 3: %s", got)
	}
	if err := h.RemoveToken(f, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Token(5); !errors.Is(err, ErrTokenNotInUse) {
		t.Fatalf("removed token: %v", err)
	}
}

func TestTokenRefusals(t *testing.T) {
	h, f, _ := formatTokenTest(t)
	if _, err := h.SetToken(f, 2, []byte(`{"type":"x","keyslots":[]}`), false); err != nil {
		t.Fatal(err)
	}
	for _, js := range []string{
		`{"type":"x","keyslots":["1"]}`, // inactive
		`{"type":"x","keyslots":[0]}`,
		`{"type":"x","keyslots":["00"]}`,
		`{"type":"x"}`,
		`{"keyslots":[]}`,
		`{"type":null,"keyslots":[]}`,
		`{"type":"luks2-keyring","keyslots":[]}`,
		`{"type":"luks2-keyring","keyslots":[],"key_description":["d"]}`,
		`{"type":"luks2-other","keyslots":[]}`,
		`"x"`,
		`{"type":"x",`,
		``,
		string(KeyringTokenJSON(`a"b`)),
	} {
		if _, err := h.SetToken(f, -1, []byte(js), false); !errors.Is(err, ErrBadToken) {
			t.Errorf("SetToken(%s): %v, want ErrBadToken", js, err)
		}
	}
	ok := []byte(`{"type":"x","keyslots":[]}`)
	if _, err := h.SetToken(f, 2, ok, false); !errors.Is(err, ErrTokenInUse) {
		t.Errorf("taken id: %v", err)
	}
	if _, err := h.SetToken(f, 2, ok, true); err != nil {
		t.Errorf("replace: %v", err)
	}
	for _, id := range []int{-2, 32} {
		if _, err := h.SetToken(f, id, ok, false); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("SetToken id %d: %v", id, err)
		}
		if err := h.RemoveToken(f, id); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("RemoveToken id %d: %v", id, err)
		}
	}
	if err := h.RemoveToken(f, 4); !errors.Is(err, ErrTokenNotInUse) {
		t.Errorf("RemoveToken of a free id: %v", err)
	}
	if err := h.AssignToken(f, 2, 1); err == nil {
		t.Error("AssignToken to an inactive keyslot succeeded")
	}
	if err := h.UnassignToken(f, 2, 0); !errors.Is(err, ErrTokenNotAssigned) {
		t.Errorf("UnassignToken of an unassigned keyslot: %v", err)
	}
	// A token too large for the JSON area is refused and not kept.
	big := []byte(`{"type":"x","keyslots":[],"pad":"` + strings.Repeat("x", 20000) + `"}`)
	if _, err := h.SetToken(f, 9, big, false); err == nil {
		t.Error("a token larger than the JSON area was stored")
	}
	if _, err := h.Token(9); !errors.Is(err, ErrTokenNotInUse) {
		t.Errorf("refused token kept: %v", err)
	}
}

func TestTokensLUKS1(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{Version: 1, PBKDF: PBKDF{Type: "pbkdf2", Iterations: 1000}, Keyslot: -1}, []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetToken(f, -1, []byte(`{"type":"x","keyslots":[]}`), false); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("LUKS1 SetToken: %v", err)
	}
	if h.Tokens() != nil {
		t.Fatal("LUKS1 has tokens")
	}
}
