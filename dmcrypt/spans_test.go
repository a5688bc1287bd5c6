package dmcrypt

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// TestDeviceOneBackendCallPerRequest: a request reaches the backend in
// one call per span (4 MiB), whatever its alignment, plus the reads of
// the sectors a write covers only in part. A remote backend pays a round
// trip per call: the crypt layer once made one per 64 KiB.
func TestDeviceOneBackendCallPerRequest(t *testing.T) {
	const offset = 64 << 10
	for _, ss := range []int{512, 4096} {
		counter := devtest.NewCounter(devtest.NewMem(offset + 4*maxSpan))
		fua := devtest.NewFUA(counter)
		d, _ := newCryptDevice(t, fua, DeviceOptions{Offset: offset, SectorSize: ss})
		buf := randBytes(t, 2*maxSpan+ss)
		for _, c := range []struct {
			name          string
			do            func() error
			reads, writes int64
		}{
			{"1 MiB read", func() error { _, err := d.ReadAt(buf[:1<<20], 0); return err }, 1, 0},
			{"1 MiB read, unaligned", func() error { _, err := d.ReadAt(buf[:1<<20], 100); return err }, 1, 0},
			{"1 MiB write", func() error { _, err := d.WriteAt(buf[:1<<20], 0); return err }, 0, 1},
			{"1 MiB scratch write", func() error { _, err := d.WriteAtScratch(buf[:1<<20], int64(ss)); return err }, 0, 1},
			{"1 MiB FUA write", func() error { _, err := d.WriteAtFUA(buf[:1<<20], 0); return err }, 0, 1},
			{"1 MiB of zeroes", func() error { return d.WriteZeroes(0, 1<<20) }, 0, 1},
			{"1 MiB write, partial first and last sectors", func() error { _, err := d.WriteAt(buf[:1<<20], 100); return err }, 2, 1},
			{"write across one sector boundary, partial first and last sectors", func() error { _, err := d.WriteAt(buf[:3*ss/2], 100); return err }, 1, 1},
			{"write inside one sector", func() error { _, err := d.WriteAt(buf[:100], 100); return err }, 1, 1},
			{"three spans read", func() error { _, err := d.ReadAt(buf[:2*maxSpan], maxSpan-int64(ss)); return err }, 3, 0},
			{"three spans write", func() error { _, err := d.WriteAt(buf[:2*maxSpan], maxSpan-int64(ss)); return err }, 0, 3},
		} {
			counter.Reset()
			if err := c.do(); err != nil {
				t.Fatalf("sector %d, %s: %v", ss, c.name, err)
			}
			if r, w := counter.Calls(); r != c.reads || w != c.writes {
				t.Errorf("sector %d, %s: %d backend reads and %d writes, want %d and %d", ss, c.name, r, w, c.reads, c.writes)
			}
		}
	}
}

// TestDeviceMatchesModel: reads and writes of every alignment (inside one
// sector, across sectors, chunk and span boundaries) through every write
// path leave the volume as a plain byte slice would, and the backend holds
// that plaintext encrypted as x/crypto/xts encrypts it.
func TestDeviceMatchesModel(t *testing.T) {
	const size, offset = 1 << 20, 4096
	for _, ss := range []int{512, 4096} {
		t.Run(fmt.Sprint(ss), func(t *testing.T) {
			mem := devtest.NewMem(offset + size)
			d, key := newCryptDevice(t, devtest.NewFUA(mem), DeviceOptions{Offset: offset, SectorSize: ss})
			d.span = 4 * chunkSize // so that requests cross spans too
			model := randBytes(t, size)
			if _, err := d.WriteAt(model, 0); err != nil {
				t.Fatal(err)
			}
			rng := mrand.New(mrand.NewPCG(uint64(ss), 13))
			for i := range 400 {
				off, n := modelRequest(rng, size, int64(ss), d.span)
				op := rng.IntN(5)
				var err error
				switch op {
				case 0:
					got := make([]byte, n)
					if _, err = d.ReadAt(got, off); err == nil && !bytes.Equal(got, model[off:off+n]) {
						t.Fatalf("request %d: read of %d at %d differs from the model", i, n, off)
					}
				case 1:
					data := randBytes(t, int(n))
					_, err = d.WriteAt(data, off)
					copy(model[off:], data)
				case 2:
					data := randBytes(t, int(n))
					_, err = d.WriteAtScratch(bytes.Clone(data), off)
					copy(model[off:], data)
				case 3:
					data := randBytes(t, int(n))
					_, err = d.WriteAtFUA(data, off)
					copy(model[off:], data)
				case 4:
					err = d.WriteZeroes(off, n)
					clear(model[off : off+n])
				}
				if err != nil {
					t.Fatalf("request %d (op %d, %d at %d): %v", i, op, n, off, err)
				}
			}
			got := make([]byte, size)
			if _, err := d.ReadAt(got, 0); err != nil || !bytes.Equal(got, model) {
				t.Fatalf("the volume differs from the model (%v)", err)
			}
			if !bytes.Equal(independentDecrypt(t, key, mem.Bytes(), offset, size, ss, 0), model) {
				t.Fatal("the backend does not hold the model's ciphertext")
			}
		})
	}
}

// modelRequest picks a request in a volume of size bytes: a sub-sector
// one, or one from a few bytes around a sector, chunk or span boundary
// to a few bytes around another.
func modelRequest(rng *mrand.Rand, size, ss, span int64) (off, n int64) {
	near := func() int64 {
		unit := []int64{ss, chunkSize, span}[rng.IntN(3)]
		at := rng.Int64N(size/unit+1)*unit + rng.Int64N(2*ss+1) - ss
		return min(max(at, 0), size)
	}
	if rng.IntN(4) == 0 {
		off = rng.Int64N(size - 1)
		return off, 1 + rng.Int64N(min(ss-off%ss, size-off))
	}
	a, b := near(), near()
	if a > b {
		a, b = b, a
	}
	if a == b { // empty: one byte instead
		a = min(a, size-1)
		b = a + 1
	}
	return a, b - a
}
