package argon2

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	xargon2 "golang.org/x/crypto/argon2"
)

// reference derives with golang.org/x/crypto/argon2, which has Argon2i and
// Argon2id.
func reference(mode Mode, password, salt []byte, time, memoryKiB uint32, threads uint8, keyLen uint32) []byte {
	if mode == Argon2i {
		return xargon2.Key(password, salt, time, memoryKiB, threads, keyLen)
	}
	return xargon2.IDKey(password, salt, time, memoryKiB, threads, keyLen)
}

// differentialCases are parameter sets for comparing with x/crypto: every
// thread count from 1 to 8, each with memory at the minimum, just over it,
// and on either side of multiples of 4*threads (which RFC 9106 rounds
// down), time costs 1 to 4, and tag lengths around the 64-byte and
// 32-byte steps of the variable-length hash H'.
func differentialCases() []params {
	var cases []params
	keyLens := []uint32{1, 4, 16, 32, 63, 64, 65, 96, 97, 128, 1000}
	n := 0
	for threads := uint32(1); threads <= 8; threads++ {
		q := 4 * threads
		for _, mem := range []uint32{2 * q, 2*q + 1, 3*q - 1, 3 * q, 5*q + 3, 16*q + q/2, 64*q - 1, 100 * q} {
			for _, mode := range []Mode{Argon2i, Argon2id} {
				cases = append(cases, params{
					mode: mode, time: uint32(n%4 + 1), memoryKiB: mem, threads: threads,
					keyLen: keyLens[n%len(keyLens)],
				})
				n++
			}
		}
	}
	return cases
}

func TestDifferential(t *testing.T) {
	cases := differentialCases()
	forEachImpl(t, func(t *testing.T, im impl) {
		rng := rand.New(rand.NewPCG(1, uint64(im)))
		var m Memory
		defer m.Free()
		for _, p := range cases {
			password := make([]byte, rng.IntN(80))
			salt := make([]byte, 8+rng.IntN(40))
			for _, b := range [][]byte{password, salt} {
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
			}
			want := reference(p.mode, password, salt, p.time, p.memoryKiB, uint8(p.threads), p.keyLen)
			got, err := m.derive(im, p, password, salt, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%+v, password %x, salt %x: differs from x/crypto/argon2", p, password, salt)
			}
		}
	})
}

// TestMemoryReuse derives in one Memory with sizes going up and down, and
// checks each against a fresh derivation: a reused Memory must not leak
// blocks of an earlier derivation into a later one.
func TestMemoryReuse(t *testing.T) {
	var m Memory
	defer m.Free()
	for _, mem := range []uint32{64, 4096, 256, 4096, 1024, 64} {
		got, err := m.Key(Argon2id, []byte("pw"), []byte("saltsalt"), 2, mem, 4, 32)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Key(Argon2id, []byte("pw"), []byte("saltsalt"), 2, mem, 4, 32)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(got, reference(Argon2id, []byte("pw"), []byte("saltsalt"), 2, mem, 4, 32)) {
			t.Fatalf("memory %d KiB after reuse: %x, want %x", mem, got, want)
		}
		if len(m.blocks) < int(mem) {
			t.Fatalf("memory %d KiB: Memory holds %d blocks", mem, len(m.blocks))
		}
	}
	m.Free()
	if m.blocks != nil {
		t.Fatal("Free left blocks")
	}
	if _, err := m.Key(Argon2i, nil, []byte("saltsalt"), 1, 32, 1, 16); err != nil {
		t.Fatalf("Key after Free: %v", err)
	}
}

func TestBadParameters(t *testing.T) {
	for _, c := range []struct {
		p    params
		want string
	}{
		{params{mode: 3, time: 1, memoryKiB: 64, threads: 1, keyLen: 32}, "unknown mode"},
		{params{mode: Argon2id, time: 0, memoryKiB: 64, threads: 1, keyLen: 32}, "time cost"},
		{params{mode: Argon2id, time: 1, memoryKiB: 64, threads: 0, keyLen: 32}, "threads"},
		{params{mode: Argon2id, time: 1, memoryKiB: 31, threads: 4, keyLen: 32}, "less than 8 KiB per thread"},
		{params{mode: Argon2id, time: 1, memoryKiB: 64, threads: 1, keyLen: 0}, "key length"},
	} {
		var m Memory
		_, err := m.Key(c.p.mode, nil, nil, c.p.time, c.p.memoryKiB, uint8(c.p.threads), c.p.keyLen)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one about %q", c.p, err, c.want)
		}
		if m.blocks != nil {
			t.Errorf("%+v: memory allocated for bad parameters", c.p)
		}
	}
}

// TestAllocsIndependentOfMemory checks that filling allocates nothing per
// block: a derivation in a reused Memory allocates the same at 64 KiB as
// at 8 MiB.
func TestAllocsIndependentOfMemory(t *testing.T) {
	var m Memory
	defer m.Free()
	allocs := func(mem uint32) float64 {
		return testing.AllocsPerRun(3, func() {
			if _, err := m.Key(Argon2id, []byte("pw"), []byte("saltsalt"), 2, mem, 4, 32); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(64), allocs(8<<10)
	if large > small {
		t.Errorf("%v allocations at 8 MiB, %v at 64 KiB: filling allocates per block", large, small)
	}
	if small > 100 {
		t.Errorf("%v allocations per derivation", small)
	}
}

func ExampleKey() {
	key, err := Key(Argon2id, []byte("password"), []byte("somesalt"), 2, 64<<10, 1, 32)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", key)
	// Output: 09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7
}
