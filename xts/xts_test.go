package xts

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	xxts "golang.org/x/crypto/xts"
)

var keySizes = []int{32, 48, 64}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// unitSizes are the data unit lengths the differential tests cover: every
// whole number of blocks up to 1 KiB, then a spread of odd and even block
// counts up to the 4096-byte sector and a little beyond.
func unitSizes() []int {
	var s []int
	for n := 16; n <= 1024; n += 16 {
		s = append(s, n)
	}
	for n := 1024 + 16*7; n < 4096+256; n += 16 * 37 {
		s = append(s, n)
	}
	return append(s, 2048, 4096-16, 4096, 4096+16)
}

func sectorTweak(sector uint64) *[16]byte {
	var t [16]byte
	binary.LittleEndian.PutUint64(t[:], sector)
	return &t
}

// TestAgainstXCrypto compares every impl with golang.org/x/crypto/xts on
// random data, in place and out of place.
func TestAgainstXCrypto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, im := range impls() {
		for _, ks := range keySizes {
			t.Run(fmt.Sprintf("%s/%d", im, ks*4), func(t *testing.T) {
				key := randBytes(r, ks)
				c, err := newCipher(key, im)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := xxts.NewCipher(aes.NewCipher, key)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range unitSizes() {
					sector := r.Uint64()
					ptx := randBytes(r, n)
					want := make([]byte, n)
					ref.Encrypt(want, ptx, sector)

					got := make([]byte, n)
					c.Encrypt(got, ptx, sectorTweak(sector))
					if !bytes.Equal(got, want) {
						t.Fatalf("%d bytes: encrypt out of place differs from x/crypto/xts", n)
					}
					inplace := bytes.Clone(ptx)
					c.Encrypt(inplace, inplace, sectorTweak(sector))
					if !bytes.Equal(inplace, want) {
						t.Fatalf("%d bytes: encrypt in place differs from x/crypto/xts", n)
					}
					c.Decrypt(got, want, sectorTweak(sector))
					if !bytes.Equal(got, ptx) {
						t.Fatalf("%d bytes: decrypt out of place does not invert", n)
					}
					c.Decrypt(inplace, inplace, sectorTweak(sector))
					if !bytes.Equal(inplace, ptx) {
						t.Fatalf("%d bytes: decrypt in place does not invert", n)
					}
				}
			})
		}
	}
}

// TestImplsAgree compares each impl with the generic one on random full
// 16-byte tweaks, which x/crypto/xts cannot express.
func TestImplsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, im := range impls()[1:] {
		for _, ks := range keySizes {
			key := randBytes(r, ks)
			gen, _ := newCipher(key, implGeneric)
			c, _ := newCipher(key, im)
			for _, n := range []int{16, 48, 64, 80, 112, 128, 144, 496, 512, 528, 4096} {
				var tweak [16]byte
				copy(tweak[:], randBytes(r, 16))
				ptx := randBytes(r, n)
				want := make([]byte, n)
				got := make([]byte, n)
				gen.Encrypt(want, ptx, &tweak)
				c.Encrypt(got, ptx, &tweak)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s/%d, %d bytes: encrypt differs from generic", im, ks*4, n)
				}
				gen.Decrypt(want, ptx, &tweak)
				c.Decrypt(got, ptx, &tweak)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s/%d, %d bytes: decrypt differs from generic", im, ks*4, n)
				}
			}
		}
	}
}

// TestSectors checks the batch API against one Encrypt per sector with
// plain64 tweaks, across tweak batch boundaries and the 64-bit wrap, for
// dm-crypt's sector sizes and for units of 3 and 5 blocks (which the VAES
// sector kernel leaves to the one-unit path).
func TestSectors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, im := range impls() {
		for _, ks := range keySizes {
			testSectors(t, r, im, ks)
		}
	}
}

func testSectors(t *testing.T, r *rand.Rand, im impl, keySize int) {
	c, _ := newCipher(randBytes(r, keySize), im)
	for _, sectorSize := range []int{48, 80, 512, 1024, 2048, 4096} {
		for _, count := range []int{1, 7, 8, 9, 17} {
			for _, first := range []uint64{0, 1 << 40, ^uint64(0) - 3} {
				step := uint64(max(sectorSize/512, 1))
				ptx := randBytes(r, sectorSize*count)
				want := bytes.Clone(ptx)
				for i := range count {
					s := want[i*sectorSize : (i+1)*sectorSize]
					c.Encrypt(s, s, sectorTweak(first+uint64(i)*step))
				}
				got := bytes.Clone(ptx)
				c.EncryptSectors(got, sectorSize, first, step)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s/%d: %d×%d from %d: EncryptSectors differs from Encrypt", im, keySize*4, count, sectorSize, first)
				}
				c.DecryptSectors(got, sectorSize, first, step)
				if !bytes.Equal(got, ptx) {
					t.Fatalf("%s/%d: %d×%d from %d: DecryptSectors does not invert", im, keySize*4, count, sectorSize, first)
				}
			}
		}
	}
}

func TestNoAllocs(t *testing.T) {
	for _, im := range impls() {
		c, _ := newCipher(make([]byte, 64), im)
		buf := make([]byte, 8*4096)
		var tweak [16]byte
		for name, fn := range map[string]func(){
			"Encrypt":        func() { c.Encrypt(buf[:4096], buf[:4096], &tweak) },
			"Decrypt":        func() { c.Decrypt(buf[:512], buf[:512], &tweak) },
			"EncryptSectors": func() { c.EncryptSectors(buf, 512, 8, 1) },
			"DecryptSectors": func() { c.DecryptSectors(buf, 4096, 8, 8) },
		} {
			if n := testing.AllocsPerRun(20, fn); n != 0 {
				t.Errorf("%s: %s allocates %v times per call", im, name, n)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := NewCipher(make([]byte, 16)); err == nil {
		t.Error("NewCipher accepted a 16-byte key")
	}
	if _, err := NewCipher(make([]byte, 65)); err == nil {
		t.Error("NewCipher accepted a 65-byte key")
	}
	c, _ := NewCipher(make([]byte, 64))
	var tweak [16]byte
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		fn()
	}
	buf := make([]byte, 1024)
	mustPanic("Encrypt of 17 bytes", func() { c.Encrypt(buf[:17], buf[:17], &tweak) })
	mustPanic("Decrypt of 0 bytes", func() { c.Decrypt(buf[:0], buf[:0], &tweak) })
	mustPanic("Encrypt into a short dst", func() { c.Encrypt(buf[:16], buf[16:48], &tweak) })
	mustPanic("Encrypt with partial overlap", func() { c.Encrypt(buf[16:64], buf[:48], &tweak) })
	mustPanic("EncryptSectors of a partial sector", func() { c.EncryptSectors(buf[:1000], 512, 0, 1) })
	mustPanic("EncryptSectors with sector size 20", func() { c.EncryptSectors(buf[:40], 20, 0, 1) })
}

func TestWipe(t *testing.T) {
	for _, im := range impls() {
		key := bytes.Repeat([]byte{0x5a}, 64)
		c, _ := newCipher(key, im)
		c.Wipe()
		var zero [maxRoundKeys]byte
		if c.enc != zero || c.dec != zero || c.tweak != zero || c.gen != nil {
			t.Errorf("%s: round keys left after Wipe", im)
		}
	}
}
