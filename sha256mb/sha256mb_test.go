package sha256mb

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// TestSumBlocks compares every implementation the machine runs with
// crypto/sha256, block by block, on random data: block sizes around the
// padding's edges and LUKS2's sector sizes, and block counts that leave
// some for each smaller kernel.
func TestSumBlocks(t *testing.T) {
	t.Logf("implementations here: %v", available())
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{512, 1024, 4096, 8192}
	for size := 1; size <= 200; size++ {
		sizes = append(sizes, size)
	}
	for _, im := range available() {
		for _, size := range sizes {
			for _, n := range []int{0, 1, 2, 3, 16, 17, 35} {
				data := make([]byte, n*size)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				sums := make([]byte, n*Size)
				sumBlocks(im, sums, data, size)
				for b := range n {
					want := sha256.Sum256(data[b*size : (b+1)*size])
					if string(sums[b*Size:(b+1)*Size]) != string(want[:]) {
						t.Fatalf("%v: block %d of %d, %d bytes each: digest differs from crypto/sha256", im, b, n, size)
					}
				}
			}
		}
	}
}

// TestVectors checks FIPS 180-2's two-block example and a million "a"s on
// every implementation, in every lane: sixteen blocks of the same message.
func TestVectors(t *testing.T) {
	long := []byte("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
	million := make([]byte, 1000000)
	for i := range million {
		million[i] = 'a'
	}
	for _, im := range available() {
		for _, c := range []struct {
			msg  []byte
			want string
		}{
			{long, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
			{million[:1000000-1000000%64], ""},
			{million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
		} {
			data := make([]byte, 0, 16*len(c.msg))
			for range 16 {
				data = append(data, c.msg...)
			}
			sums := make([]byte, 16*Size)
			sumBlocks(im, sums, data, len(c.msg))
			want := c.want
			if want == "" {
				d := sha256.Sum256(c.msg)
				want = hex.EncodeToString(d[:])
			}
			for j := range 16 {
				if got := hex.EncodeToString(sums[j*Size : (j+1)*Size]); got != want {
					t.Fatalf("%v: %d-byte message in lane %d: %s, want %s", im, len(c.msg), j, got, want)
				}
			}
		}
	}
}

func TestBadArguments(t *testing.T) {
	for _, c := range []struct{ sums, data, size int }{{32, 100, 64}, {32, 64, 0}, {31, 64, 64}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%d bytes of sums, %d of data, blocks of %d: no panic", c.sums, c.data, c.size)
				}
			}()
			SumBlocks(make([]byte, c.sums), make([]byte, c.data), c.size)
		}()
	}
}

// BenchmarkSumBlocks hashes 1 MiB in 4 KiB blocks (a hotzone piece) with
// each implementation; "generic" is crypto/sha256 one block at a time.
func BenchmarkSumBlocks(b *testing.B) {
	data := make([]byte, 1<<20)
	sums := make([]byte, len(data)/4096*Size)
	for _, im := range available() {
		b.Run(im.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				sumBlocks(im, sums, data, 4096)
			}
		})
	}
}
