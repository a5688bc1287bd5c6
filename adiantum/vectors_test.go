package adiantum

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strconv"
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

// checkVector encrypts and decrypts v both in place and out of place.
func checkVector(t *testing.T, name string, rounds int, im impl, v adiantumVector) {
	t.Helper()
	c, err := newCipher(v.key, rounds, im)
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
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, rounds := range []int{12, 20} {
			name := "testdata/adiantum_xchacha" + map[int]string{12: "12", 20: "20"}[rounds] + "_aes.txt"
			for _, v := range readVectors(t, name) {
				checkVector(t, name, rounds, im, v)
			}
		}
	})
}

// readFields reads the whitespace-separated fields of each non-comment line.
func readFields(t *testing.T, name string) [][]string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, strings.Fields(line))
	}
	if len(lines) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return lines
}

// unhex decodes a hex field, "-" being empty.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	if s == "-" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamOnly is a Cipher with only its XChaCha key and impl set.
func streamOnly(key []byte, rounds int, im impl) *Cipher {
	c := &Cipher{rounds: rounds, impl: im}
	for i := range c.streamKey {
		c.streamKey[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	return c
}

// TestXChaChaVectors checks XChaCha12 and XChaCha20 keystream blocks at
// block counters 0, 1, 1023, 1024 and 2048, and XChaCha20 encryptions.
func TestXChaChaVectors(t *testing.T) {
	forEachStreamLine(t, "testdata/xchacha.txt", func(t *testing.T, i int, f []string, c *Cipher, nonce *[24]byte) {
		switch f[3] {
		case "block":
			n, _ := strconv.Atoi(f[4])
			ks := make([]byte, (n+1)*chachaBlockBytes)
			c.xorKeyStream(ks, ks, nonce)
			if want := unhex(t, f[5]); !bytes.Equal(ks[n*chachaBlockBytes:], want) {
				t.Fatalf("line %d: XChaCha%d block %d\n got %x\nwant %x", i, c.rounds, n, ks[n*chachaBlockBytes:], want)
			}
		case "xor":
			pt, ct := unhex(t, f[4]), unhex(t, f[5])
			got := make([]byte, len(pt))
			c.xorKeyStream(got, pt, nonce)
			if !bytes.Equal(got, ct) {
				t.Fatalf("line %d: XChaCha%d of %d bytes\n got %x\nwant %x", i, c.rounds, len(pt), got, ct)
			}
		default:
			t.Fatalf("line %d: unknown kind %q", i, f[3])
		}
	})
}

// forEachStreamLine calls check, under every impl, for each line of file
// with a Cipher of the line's rounds (field 0) and XChaCha key (field 1),
// and the nonce: field 2's first 24 bytes.
func forEachStreamLine(t *testing.T, file string, check func(t *testing.T, i int, f []string, c *Cipher, nonce *[24]byte)) {
	vs := readFields(t, file)
	forEachImpl(t, func(t *testing.T, im impl) {
		for i, f := range vs {
			rounds, _ := strconv.Atoi(f[0])
			var nonce [24]byte
			copy(nonce[:], unhex(t, f[2]))
			check(t, i, f, streamOnly(unhex(t, f[1]), rounds, im), &nonce)
		}
	})
}

// TestNHVectors checks NH on 16-, 1008- and 1024-byte messages.
func TestNHVectors(t *testing.T) {
	checkKeyedHash(t, "testdata/nh.txt", "NH", func(im impl, key, msg []byte) []byte {
		var k nhKey
		k.init(key)
		var h [4]uint64
		nhSum(im, &k, msg, &h)
		got := make([]byte, 32)
		for p := range h {
			binary.LittleEndian.PutUint64(got[8*p:], h[p])
		}
		return got
	})
}

// TestNHPoly1305Vectors checks the message hash (NH over 1024-byte chunks,
// the last unit zero-padded, then Poly1305 without s) on messages of 0, 16,
// 19, 1024, 1040 and 2048 bytes.
func TestNHPoly1305Vectors(t *testing.T) {
	checkKeyedHash(t, "testdata/nhpoly1305.txt", "NHPoly1305", func(im impl, key, msg []byte) []byte {
		c := Cipher{impl: im}
		c.message.init(key[:16])
		c.nh.init(key[16:])
		got := make([]byte, 16)
		c.messageHash(msg).put(got)
		return got
	})
}

// checkKeyedHash checks hash, under every impl, against the lines of file:
// key, message and digest in hex.
func checkKeyedHash(t *testing.T, file, name string, hash func(im impl, key, msg []byte) []byte) {
	vs := readFields(t, file)
	forEachImpl(t, func(t *testing.T, im impl) {
		for i, f := range vs {
			msg := unhex(t, f[1])
			got := hash(im, unhex(t, f[0]), msg)
			if want := unhex(t, f[2]); !bytes.Equal(got, want) {
				t.Fatalf("line %d (%d bytes): %s\n got %x\nwant %x", i, len(msg), name, got, want)
			}
		}
	})
}

// TestKernelXChaChaVectors checks Linux's xchacha12 and xchacha20 self-test
// vectors, whose IV carries a starting block counter.
func TestKernelXChaChaVectors(t *testing.T) {
	forEachStreamLine(t, "testdata/xchacha_kernel.txt", func(t *testing.T, i int, f []string, c *Cipher, nonce *[24]byte) {
		counter := binary.LittleEndian.Uint64(unhex(t, f[2])[24:])
		pt, ct := unhex(t, f[3]), unhex(t, f[4])
		got := make([]byte, len(pt))
		c.xorKeyStreamAt(got, pt, nonce, counter)
		if !bytes.Equal(got, ct) {
			t.Fatalf("line %d: XChaCha%d of %d bytes\n got %x\nwant %x", i, c.rounds, len(pt), got, ct)
		}
	})
}

// kernelAdiantumKeys are the keys (first 8 bytes) and lengths of Linux's
// adiantum_xchacha12_aes_tv_template in crypto/testmgr.h, which the kernel
// took from the authors' published vectors. This test proves the data file
// carries every one of them and checks them.
var kernelAdiantumKeys = []struct {
	key string
	n   int
}{
	{"9eebb2493c1cf5f4", 16}, {"362b5797f85dcd99", 31}, {"a52824341a3cd8f7", 128},
	{"d381721823ff6f4a", 512}, {"ebe5113a72eb10be", 1536}, {"60d536b08e5d0e5f", 4096},
}

func TestKernelAdiantumVectors(t *testing.T) {
	const name = "testdata/adiantum_xchacha12_aes.txt"
	vs := readVectors(t, name)
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, k := range kernelAdiantumKeys {
			found := false
			for _, v := range vs {
				if hex.EncodeToString(v.key[:8]) == k.key && len(v.plaintext) == k.n {
					found = true
					checkVector(t, name, 12, im, v)
				}
			}
			if !found {
				t.Errorf("%s: kernel vector %s (%d bytes) missing", name, k.key, k.n)
			}
		}
	})
}
