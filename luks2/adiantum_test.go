package luks2

import (
	"bytes"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestAdiantumHeader: an Adiantum volume made by luksd passes cryptsetup's
// luksDump (which needs no kernel support) and luksd reopens its keyslot,
// whose area is encrypted with Adiantum too.
func TestAdiantumHeader(t *testing.T) {
	for _, cipher := range []string{"xchacha12,aes-adiantum-plain64", "xchacha20,aes-adiantum-plain64"} {
		t.Run(cipher, func(t *testing.T) {
			img := testtool.Image(t, 20<<20)
			f, size := openRW(t, img)
			pass := []byte("adiantum")
			h, vk, err := Format(f, size, FormatOptions{Cipher: cipher, PBKDF: cheapArgon2id}, pass)
			if err != nil {
				t.Fatal(err)
			}
			if len(vk) != 32 {
				t.Fatalf("Adiantum volume key has %d bytes, want 32", len(vk))
			}
			dump := cryptsetup(t, "luksDump", img)
			if !strings.Contains(dump, "\tcipher: "+cipher+"\n") || !strings.Contains(dump, "\tCipher:     "+cipher+"\n") {
				t.Fatalf("cryptsetup's dump lacks the Adiantum cipher:\n%s", dump)
			}
			sameLines(t, "Adiantum luksDump", dumpText(t, h, DumpOptions{}), dump)
			h2, f2 := readHdr(t, img)
			got, _, err := h2.Unlock(f2, pass, -1)
			if err != nil || !bytes.Equal(got, vk) {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}
