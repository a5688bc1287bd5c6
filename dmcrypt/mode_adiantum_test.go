package dmcrypt

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
	reference "lukechampine.com/adiantum"
	"lukechampine.com/adiantum/hbsh"
)

// TestAdiantumSectors checks every sector of a multi-sector buffer against
// lukechampine.com/adiantum given dm-crypt's tweak: the plain64 IV (LE64 of
// the 512-byte-unit sector) followed by 24 zero bytes.
func TestAdiantumSectors(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		spec string
		ref  func([]byte) *hbsh.HBSH
	}{
		{"xchacha12,aes-adiantum-plain64", reference.New},
		{"xchacha20,aes-adiantum-plain64", reference.New20},
	} {
		for _, ss := range []int{512, 1024, 4096} {
			key := make([]byte, 32)
			for i := range key {
				key[i] = byte(rng.Uint32())
			}
			c, err := New(tc.spec, key)
			if err != nil {
				t.Fatal(err)
			}
			ref := tc.ref(key)
			plain := make([]byte, 3*ss)
			for i := range plain {
				plain[i] = byte(rng.Uint32())
			}
			first := rng.Uint64() >> 8 &^ 7
			buf := bytes.Clone(plain)
			c.Encrypt(buf, first, ss)
			for i := 0; i < 3; i++ {
				var tweak [32]byte
				binary.LittleEndian.PutUint64(tweak[:], first+uint64(i*ss/512))
				want := ref.Encrypt(bytes.Clone(plain[i*ss:(i+1)*ss]), tweak[:])
				if !bytes.Equal(buf[i*ss:(i+1)*ss], want) {
					t.Fatalf("%s sector size %d: sector %d differs from lukechampine.com/adiantum", tc.spec, ss, i)
				}
			}
			c.Decrypt(buf, first, ss)
			if !bytes.Equal(buf, plain) {
				t.Fatalf("%s sector size %d: decrypt does not invert encrypt", tc.spec, ss)
			}
		}
	}
}

func TestAdiantumSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		keyLen int
	}{
		{"xchacha12,aes-adiantum-plain64", 64},
		{"xchacha12,aes-adiantum-plain64", 16},
		{"xchacha8,aes-adiantum-plain64", 32},
		{"aes-adiantum-plain64", 32},
		{"xchacha12,aes-adiantum-essiv:sha256", 32},
	} {
		if _, err := New(tc.spec, make([]byte, tc.keyLen)); err == nil {
			t.Errorf("%s with a %d-byte key accepted", tc.spec, tc.keyLen)
		}
	}
}

func TestAdiantumNoAllocs(t *testing.T) {
	if testtool.Race {
		t.Skip("allocation counts are meaningless under -race; make unit runs this test without it")
	}
	c, err := New("xchacha12,aes-adiantum-plain64", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	if n := testing.AllocsPerRun(50, func() { c.Encrypt(buf, 7, 4096); c.Decrypt(buf, 7, 512) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}
