package luks2

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// opensslDigest is openssl's digest of data: an implementation that is
// not luksd's.
func opensslDigest(t *testing.T, hash string, data []byte) []byte {
	t.Helper()
	cmd := exec.Command(testtool.Need(t, "openssl"), "dgst", "-"+hash, "-binary")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl dgst -%s: %v", hash, err)
	}
	return out
}

// TestPlainKeyLikeCryptsetup checks plain mode's key derivation against
// cryptsetup's documented algorithm computed with openssl: round i hashes
// i letters 'A' and the passphrase, pieces are concatenated up to the key
// size, ":N" zero-pads after N hashed bytes, "plain" copies.
func TestPlainKeyLikeCryptsetup(t *testing.T) {
	pass := []byte("correct horse")
	round := func(hash string, i int) []byte {
		return opensslDigest(t, hash, append([]byte(strings.Repeat("A", i)), pass...))
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		spec    string
		keySize int
		want    []byte
	}{
		// cryptsetup's plain default: ripemd160 (20 bytes) for a 32-byte key.
		{"ripemd160", 32, cat(round("ripemd160", 0), round("ripemd160", 1)[:12])},
		{"sha256", 32, round("sha256", 0)},
		{"sha256", 64, cat(round("sha256", 0), round("sha256", 1))},
		{"sha1", 64, cat(round("sha1", 0), round("sha1", 1), round("sha1", 2), round("sha1", 3)[:4])},
		{"sha512", 16, round("sha512", 0)[:16]},
		{"sha256:16", 32, cat(round("sha256", 0)[:16], make([]byte, 16))},
		{"plain", 8, pass[:8]},
		{"plain:4", 8, cat(pass[:4], make([]byte, 4))},
	}
	for _, c := range cases {
		key := bytes.Repeat([]byte{0xee}, c.keySize)
		if err := PlainKey(c.spec, key, pass); err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if !bytes.Equal(key, c.want) {
			t.Errorf("%s, %d bytes: key %x, want %x", c.spec, c.keySize, key, c.want)
		}
	}
	for _, spec := range []string{"sha256:33", "sha256:", "sha256:x", "plain"} {
		key := make([]byte, 32)
		if err := PlainKey(spec, key, []byte("short")); !errors.Is(err, ErrPlainHash) {
			t.Errorf("%s: err %v, want ErrPlainHash", spec, err)
		}
	}
	if err := PlainKey("sha999", make([]byte, 32), pass); !errors.Is(err, ErrUnsupported) {
		t.Errorf("sha999: err %v, want ErrUnsupported", err)
	}
}
