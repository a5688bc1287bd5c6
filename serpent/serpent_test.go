package serpent

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestSboxByTable checks the key schedule's S-box lookup on all 16 inputs
// in every bit column: column j holds nibble j%16.
func TestSboxByTable(t *testing.T) {
	var x [4]uint32
	for j := range 32 {
		for k := range 4 {
			x[k] |= uint32(j%16>>k&1) << j
		}
	}
	for i := range sboxes {
		y := sboxByTable(&sboxes[i], x[0], x[1], x[2], x[3])
		for j := range 32 {
			var got uint8
			for k := range 4 {
				got |= uint8(y[k]>>j&1) << k
			}
			if want := sboxes[i][j%16]; got != want {
				t.Errorf("S%d(%d) = %d, want %d", i, j%16, got, want)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 24, 31, 32} {
		key := make([]byte, n)
		rand.Read(key)
		c, err := NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		pt := make([]byte, 16)
		rand.Read(pt)
		buf := bytes.Clone(pt)
		c.Encrypt(buf, buf)
		if bytes.Equal(buf, pt) {
			t.Fatalf("%d-byte key: encryption changed nothing", n)
		}
		c.Decrypt(buf, buf)
		if !bytes.Equal(buf, pt) {
			t.Fatalf("%d-byte key: decrypt(encrypt(p)) = %x, want %x", n, buf, pt)
		}
	}
	if _, err := NewCipher(make([]byte, 33)); err == nil {
		t.Error("33-byte key accepted")
	}
}

func TestNoAllocations(t *testing.T) {
	c, _ := NewCipher(make([]byte, 32))
	buf := make([]byte, 16)
	if n := testing.AllocsPerRun(100, func() { c.Encrypt(buf, buf); c.Decrypt(buf, buf) }); n != 0 {
		t.Errorf("%v allocations per block", n)
	}
}

func TestWipe(t *testing.T) {
	c, _ := NewCipher([]byte("0123456789abcdef"))
	c.Wipe()
	if c.rk != ([rounds + 1][4]uint32{}) {
		t.Error("round keys left after Wipe")
	}
}

func BenchmarkEncrypt(b *testing.B) {
	c, _ := NewCipher(make([]byte, 32))
	buf := make([]byte, 16)
	b.SetBytes(16)
	for b.Loop() {
		c.Encrypt(buf, buf)
	}
}

func BenchmarkDecrypt(b *testing.B) {
	c, _ := NewCipher(make([]byte, 32))
	buf := make([]byte, 16)
	b.SetBytes(16)
	for b.Loop() {
		c.Decrypt(buf, buf)
	}
}
