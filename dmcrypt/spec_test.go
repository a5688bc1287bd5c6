package dmcrypt

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	good := map[string]Spec{
		"aes-xts-plain64":      {Cipher: "aes", Mode: "xts", IV: "plain64"},
		"aes-xts-plain":        {Cipher: "aes", Mode: "xts", IV: "plain"},
		"aes-xts-plain64be":    {Cipher: "aes", Mode: "xts", IV: "plain64be"},
		"aes-cbc-essiv:sha256": {Cipher: "aes", Mode: "cbc", IV: "essiv", IVOpt: "sha256"},
		"aes-cbc-plain64":      {Cipher: "aes", Mode: "cbc", IV: "plain64"},
	}
	for s, want := range good {
		got, err := ParseSpec(s)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", s, err)
			continue
		}
		if got != want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", s, got, want)
		}
		if got.String() != s {
			t.Errorf("String() = %q, want %q", got.String(), s)
		}
	}
	bad := map[string]string{
		"cipher_null-ecb":                    "not secure",
		"aes-ecb":                            "not secure",
		"aes-ecb-plain64":                    "not secure",
		"capi:xts(ecb(aes-generic))-plain64": "no known cipher specification",
		"aes":                                "no known cipher specification",
		"aes-xts-plain64-extra":              "no known cipher specification",
		"aes-gcm-random":                     "unsupported cipher mode",
		"aes-xts-benbi":                      "unsupported IV generator",
		"aes-cbc-essiv":                      "does not fit",
		"aes-cbc-plain64:sha256":             "does not fit",
	}
	for s, msg := range bad {
		_, err := ParseSpec(s)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseSpec(%q) error = %v, want one containing %q", s, err, msg)
		}
	}
}

func TestKeySizes(t *testing.T) {
	cases := []struct {
		spec string
		n    int
		ok   bool
	}{
		{"aes-xts-plain64", 32, true},
		{"aes-xts-plain64", 64, true},
		{"aes-xts-plain64", 16, false},
		{"aes-xts-plain64", 65, false},
		{"aes-cbc-essiv:sha256", 16, true},
		{"aes-cbc-essiv:sha256", 32, true},
		{"aes-cbc-essiv:sha256", 64, false},
		{"serpent-xts-plain64", 32, true},
		{"serpent-xts-plain64", 48, true},
		{"serpent-xts-plain64", 64, true},
		{"serpent-xts-plain64", 16, false},
		{"twofish-xts-plain64", 64, true},
		{"twofish-xts-plain64", 40, false},
		{"serpent-cbc-essiv:sha256", 32, true},
		{"twofish-cbc-plain", 16, true},
		{"twofish-cbc-plain64", 64, false},
		{"blowfish-cbc-plain", 16, false},
	}
	for _, c := range cases {
		_, err := New(c.spec, make([]byte, c.n))
		if (err == nil) != c.ok {
			t.Errorf("New(%s, %d-byte key): err = %v, want ok=%v", c.spec, c.n, err, c.ok)
		}
	}
	if _, err := New("aes-cbc-essiv:md5", make([]byte, 32)); err == nil {
		t.Error("essiv:md5 accepted")
	}
}
