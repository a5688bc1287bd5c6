package adiantum

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"golang.org/x/crypto/chacha20"
	// x/crypto/poly1305 is deprecated as a MAC for general use. TestPoly1305
	// uses it as what it is, the raw primitive, an independent reference for
	// Adiantum's s-less Poly1305; neither the standard library nor x/crypto
	// exposes another.
	//lint:ignore SA1019 the raw Poly1305 primitive is what the test checks against
	"golang.org/x/crypto/poly1305"
	reference "lukechampine.com/adiantum"
	"lukechampine.com/adiantum/hbsh"
)

// referenceCipher is lukechampine.com/adiantum with the given rounds. Its
// tweak is hashed as Poly1305(bitlen || tweak), exactly the kernel's header
// block, so dm-crypt's 32-byte plain64 IV is passed to it unchanged.
func referenceCipher(key []byte, rounds int) *hbsh.HBSH {
	if rounds == 20 {
		return reference.New20(key)
	}
	return reference.New(key)
}

// plain64 is dm-crypt's plain64 IV widened to Adiantum's tweak.
func plain64(sector uint64) []byte {
	t := make([]byte, TweakSize)
	binary.LittleEndian.PutUint64(t, sector)
	return t
}

// TestDifferential compares random keys, tweaks and lengths with
// lukechampine.com/adiantum, on every implementation path.
func TestDifferential(t *testing.T) {
	lengths := []int{16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 511, 512, 513,
		527, 528, 1024, 1039, 1040, 1041, 2048, 3000, 4095, 4096, 4097, 8192, 9000}
	forEachImpl(t, func(t *testing.T, im impl) {
		rng := rand.New(rand.NewPCG(1, 2))
		lengths := lengths
		for range 20 {
			lengths = append(lengths[:len(lengths):len(lengths)], 16+rng.IntN(5000))
		}
		for _, rounds := range []int{12, 20} {
			for _, n := range lengths {
				key := randBytes(rng, KeySize)
				tweak := randBytes(rng, TweakSize)
				if n%3 == 0 {
					tweak = plain64(rng.Uint64())
				}
				msg := randBytes(rng, n)
				c, err := newCipher(key, rounds, im)
				if err != nil {
					t.Fatal(err)
				}
				want := referenceCipher(key, rounds).Encrypt(bytes.Clone(msg), tweak)
				got := make([]byte, n)
				c.Encrypt(got, msg, tweak)
				if !bytes.Equal(got, want) {
					t.Fatalf("rounds %d, %d bytes: encryption differs from lukechampine.com/adiantum", rounds, n)
				}
				back := referenceCipher(key, rounds).Decrypt(bytes.Clone(got), tweak)
				c.Decrypt(got, got, tweak)
				if !bytes.Equal(got, msg) || !bytes.Equal(back, msg) {
					t.Fatalf("rounds %d, %d bytes: decryption does not invert", rounds, n)
				}
			}
		}
	})
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestXChaCha20 checks the stream against x/crypto's XChaCha20, every path,
// at lengths around the SIMD group sizes.
func TestXChaCha20(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{0, 1, 63, 64, 65, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 1536, 2047, 4080, 4096, 5000} {
			key := randBytes(rng, KeySize)
			var nonce [24]byte
			copy(nonce[:], randBytes(rng, 24))
			c, err := newCipher(key, 20, im)
			if err != nil {
				t.Fatal(err)
			}
			src := randBytes(rng, n)
			got := make([]byte, n)
			c.xorKeyStream(got, src, &nonce)
			want := make([]byte, n)
			x, err := chacha20.NewUnauthenticatedCipher(key, nonce[:])
			if err != nil {
				t.Fatal(err)
			}
			x.XORKeyStream(want, src)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d bytes: XChaCha20 differs from x/crypto", n)
			}
		}
	})
}

// TestPoly1305 checks the s-less Poly1305 against x/crypto's with s = 0,
// including accumulators near the modulus (all-ones blocks, keys).
func TestPoly1305(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200 {
		var key [32]byte
		copy(key[:16], randBytes(rng, 16))
		nblocks := 1 + rng.IntN(20)
		msg := randBytes(rng, 16*nblocks)
		if i%4 == 0 {
			for j := range key[:16] {
				key[j] = 0xff
			}
			for j := range msg {
				msg[j] = 0xff
			}
		}
		var want [16]byte
		poly1305.Sum(&want, msg, &key)
		var k polyKey
		k.init(key[:16])
		var p polyState
		for j := 0; j < len(msg); j += 16 {
			b := load128(msg[j:])
			p.block(&k, b.lo, b.hi)
		}
		var got [16]byte
		p.sum().put(got[:])
		if got != want {
			t.Fatalf("case %d: got %x, want %x", i, got, want)
		}
	}
}

// TestNHImpls compares every NH impl with the generic one on whole-unit
// messages of every length up to a chunk.
func TestNHImpls(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var k nhKey
	k.init(randBytes(rng, nhKeyBytes))
	msg := randBytes(rng, nhChunkBytes)
	forEachImpl(t, func(t *testing.T, im impl) {
		for n := 0; n <= nhChunkBytes; n += nhUnitBytes {
			var got, want [4]uint64
			nhSum(im, &k, msg[:n], &got)
			nhSumGeneric(&k, msg[:n], &want)
			if got != want {
				t.Fatalf("%d bytes: NH %x, generic %x", n, got, want)
			}
		}
	})
}

func TestNewErrors(t *testing.T) {
	if _, err := New(make([]byte, 31), 12); err == nil {
		t.Error("31-byte key accepted")
	}
	if _, err := New(make([]byte, 64), 12); err == nil {
		t.Error("64-byte key accepted")
	}
	for _, r := range []int{0, 8, 13, 24} {
		if _, err := New(make([]byte, 32), r); err == nil {
			t.Errorf("%d rounds accepted", r)
		}
	}
}

// TestAllocs checks that Encrypt and Decrypt never allocate, on every impl.
// Its subtests run one after the other: AllocsPerRun counts every
// goroutine's allocations.
func TestAllocs(t *testing.T) {
	buf := make([]byte, 4096)
	odd := make([]byte, 1000+7)
	tweak := plain64(9)
	for _, im := range impls() {
		c, err := newCipher(make([]byte, KeySize), 12, im)
		if err != nil {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(20, func() {
			c.Encrypt(buf, buf, tweak)
			c.Decrypt(buf, buf, tweak)
			c.Encrypt(odd, odd, tweak)
			c.Decrypt(odd, odd, tweak)
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per call", im, n)
		}
	}
}

// TestConcurrent runs one Cipher per impl from many goroutines; with -race
// it also proves that calls share no mutable state.
func TestConcurrent(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	ref := referenceCipher(key, 12)
	want := make([][]byte, 8)
	for g := range want {
		want[g] = ref.Encrypt(bytes.Repeat([]byte{byte(g)}, 512), plain64(uint64(g)))
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		c, err := newCipher(key, 12, im)
		if err != nil {
			t.Fatal(err)
		}
		testConcurrent(t, c, want)
	})
}

func testConcurrent(t *testing.T, c *Cipher, want [][]byte) {
	var wg sync.WaitGroup
	errs := make(chan int, len(want))
	for g := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 512)
			for range 50 {
				for i := range buf {
					buf[i] = byte(g)
				}
				c.Encrypt(buf, buf, plain64(uint64(g)))
				if !bytes.Equal(buf, want[g]) {
					errs <- g
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for g := range errs {
		t.Errorf("goroutine %d got a wrong ciphertext", g)
	}
}

func TestWipe(t *testing.T) {
	c, err := New(bytes.Repeat([]byte{1}, KeySize), 20)
	if err != nil {
		t.Fatal(err)
	}
	c.Wipe()
	if c.streamKey != [8]uint32{} || c.nh != (nhKey{}) || c.header != (polyKey{}) || c.block != nil {
		t.Fatal("key material left after Wipe")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a wiped Cipher encrypted")
		}
	}()
	c.Encrypt(make([]byte, 32), make([]byte, 32), make([]byte, 32))
}
