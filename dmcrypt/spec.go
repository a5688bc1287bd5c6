// Package dmcrypt implements dm-crypt's data transformation in userspace:
// cipher specs as the kernel and cryptsetup write them, IV generators, the
// sector ciphers, and the crypt layer that turns a ciphertext
// blockdev.Device into a plaintext one.
package dmcrypt

import (
	"fmt"
	"strings"
)

// Spec is a parsed dm-crypt cipher specification such as "aes-xts-plain64",
// "aes-cbc-essiv:sha256" or "xchacha12,aes-adiantum-plain64".
type Spec struct {
	Cipher string // block or stream cipher part: "aes", "xchacha12,aes"
	Mode   string // chaining mode: "xts", "cbc", "adiantum"
	IV     string // IV generator: "plain64", "plain", "plain64be", "essiv"
	IVOpt  string // IV generator option, the hash of essiv: "sha256"
}

// ParseSpec parses a cipher spec in dm-crypt's "cipher-mode-iv[:ivopt]" form.
// Kernel crypto API specs ("capi:...") and unsafe specs (cipher_null, ECB)
// are refused.
func ParseSpec(s string) (Spec, error) {
	if strings.HasPrefix(s, "capi:") {
		return Spec{}, fmt.Errorf("no known cipher specification pattern for %q", s)
	}
	parts := strings.Split(s, "-")
	if len(parts) < 2 || len(parts) > 3 {
		return Spec{}, fmt.Errorf("no known cipher specification pattern for %q", s)
	}
	sp := Spec{Cipher: parts[0], Mode: parts[1]}
	if len(parts) == 3 {
		sp.IV, sp.IVOpt, _ = strings.Cut(parts[2], ":")
	}
	if sp.Cipher == "cipher_null" || sp.Cipher == "null" || sp.Mode == "ecb" || sp.Mode == "null" {
		return Spec{}, fmt.Errorf("cipher %q is not secure (no IV or no encryption) and is refused", s)
	}
	if _, ok := modes[sp.Mode]; !ok {
		return Spec{}, fmt.Errorf("unsupported cipher mode %q in %q", sp.Mode, s)
	}
	if _, ok := ivGens[sp.IV]; !ok {
		return Spec{}, fmt.Errorf("unsupported IV generator %q in %q", parts[len(parts)-1], s)
	}
	if (sp.IV == "essiv") != (sp.IVOpt != "") {
		return Spec{}, fmt.Errorf("IV option %q does not fit IV generator %q in %q", sp.IVOpt, sp.IV, s)
	}
	return sp, nil
}

// String returns the spec in dm-crypt's form.
func (sp Spec) String() string {
	s := sp.Cipher + "-" + sp.Mode
	if sp.IV != "" {
		s += "-" + sp.IV
	}
	if sp.IVOpt != "" {
		s += ":" + sp.IVOpt
	}
	return s
}

// CheckKeySize reports whether n bytes is a valid volume key size for sp.
func (sp Spec) CheckKeySize(n int) error {
	m := modes[sp.Mode]
	for _, k := range m.keySizes(sp.Cipher) {
		if k == n {
			return nil
		}
	}
	return fmt.Errorf("key size %d bits is not valid for cipher %s", n*8, sp)
}

// New returns the sector cipher for spec keyed with key. The key is copied
// into the cipher's own state; the caller may wipe its copy.
func New(spec string, key []byte) (SectorCipher, error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return sp.New(key)
}

// New returns the sector cipher for sp keyed with key.
func (sp Spec) New(key []byte) (SectorCipher, error) {
	if err := sp.CheckKeySize(len(key)); err != nil {
		return nil, err
	}
	m := modes[sp.Mode]
	ivg, err := ivGens[sp.IV](sp, key)
	if err != nil {
		return nil, err
	}
	return m.newCipher(sp, key, ivg)
}

// modeInfo describes a chaining mode. Each mode registers itself in its own
// file (mode_xts.go, mode_cbc.go, mode_adiantum.go).
type modeInfo struct {
	keySizes  func(cipher string) []int
	newCipher func(sp Spec, key []byte, iv ivGenerator) (SectorCipher, error)
}

var modes = map[string]modeInfo{}
