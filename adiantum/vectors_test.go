package adiantum

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

type adiantumVector struct {
	key, tweak, plaintext, ciphertext []byte
}

// readVectors reads "key tweak plaintext ciphertext" hex lines.
func readVectors(t *testing.T, name string) []adiantumVector {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []adiantumVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("%s: malformed line %q", name, line[:min(len(line), 40)])
		}
		var v adiantumVector
		for i, p := range []*[]byte{&v.key, &v.tweak, &v.plaintext, &v.ciphertext} {
			if *p, err = hex.DecodeString(fields[i]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return vs
}

func mustHex(s string) []byte {
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// checkVector encrypts and decrypts v both in place and out of place.
func checkVector(t *testing.T, name string, rounds int, v adiantumVector) {
	t.Helper()
	c, err := New(v.key, rounds)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(v.plaintext))
	c.Encrypt(got, v.plaintext, v.tweak)
	if !bytes.Equal(got, v.ciphertext) {
		t.Fatalf("%s (%d bytes): encrypt\n got %x\nwant %x", name, len(v.plaintext), got, v.ciphertext)
	}
	c.Decrypt(got, v.ciphertext, v.tweak)
	if !bytes.Equal(got, v.plaintext) {
		t.Fatalf("%s (%d bytes): decrypt mismatch", name, len(v.plaintext))
	}
	buf := bytes.Clone(v.plaintext)
	c.Encrypt(buf, buf, v.tweak)
	if !bytes.Equal(buf, v.ciphertext) {
		t.Fatalf("%s (%d bytes): in-place encrypt mismatch", name, len(v.plaintext))
	}
	c.Decrypt(buf, buf, v.tweak)
	if !bytes.Equal(buf, v.plaintext) {
		t.Fatalf("%s (%d bytes): in-place decrypt mismatch", name, len(v.plaintext))
	}
}

// TestAuthorsVectors checks the Adiantum authors' published vectors.
func TestAuthorsVectors(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for _, rounds := range []int{12, 20} {
			name := "testdata/adiantum_xchacha" + map[int]string{12: "12", 20: "20"}[rounds] + "_aes.txt"
			for _, v := range readVectors(t, name) {
				checkVector(t, name, rounds, v)
			}
		}
	})
}
