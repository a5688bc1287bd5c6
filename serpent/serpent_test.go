package serpent

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestSboxCircuits checks each generated circuit against the table on all
// 16 inputs, in every one of the 32 bit columns at once.
func TestSboxCircuits(t *testing.T) {
	fwd := [8]func(a, b, c, d uint32) (uint32, uint32, uint32, uint32){sbox0, sbox1, sbox2, sbox3, sbox4, sbox5, sbox6, sbox7}
	inv := [8]func(a, b, c, d uint32) (uint32, uint32, uint32, uint32){sboxInv0, sboxInv1, sboxInv2, sboxInv3, sboxInv4, sboxInv5, sboxInv6, sboxInv7}
	check := func(name string, f func(a, b, c, d uint32) (uint32, uint32, uint32, uint32), table [16]uint8) {
		// Column j holds nibble j%16, so each input appears twice.
		var x [4]uint32
		for j := range 32 {
			for k := range 4 {
				x[k] |= uint32(j%16>>k&1) << j
			}
		}
		var y [4]uint32
		y[0], y[1], y[2], y[3] = f(x[0], x[1], x[2], x[3])
		for j := range 32 {
			var got uint8
			for k := range 4 {
				got |= uint8(y[k]>>j&1) << k
			}
			if want := table[j%16]; got != want {
				t.Errorf("%s(%d) = %d, want %d", name, j%16, got, want)
			}
		}
	}
	for i := range 8 {
		check("S"+string(rune('0'+i)), fwd[i], sboxes[i])
		check("S"+string(rune('0'+i))+"^-1", inv[i], inverse(sboxes[i]))
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
