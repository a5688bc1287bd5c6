package dmcrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"golang.org/x/crypto/xts"
)

var errInjected = errors.New("injected I/O error")

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// newTestDevice builds an aes-xts-plain64 crypt layer with a random key
// over a fresh in-memory backend and returns both with the key.
func newTestDevice(t testing.TB, backendSize int, opts DeviceOptions) (*Device, *devtest.Mem, []byte) {
	t.Helper()
	m := devtest.NewMem(backendSize)
	d, key := newCryptDevice(t, m, opts)
	return d, m, key
}

// newCryptDevice builds an aes-xts-plain64 crypt layer with a random key
// over backend.
func newCryptDevice(t testing.TB, backend blockdev.Device, opts DeviceOptions) (*Device, []byte) {
	t.Helper()
	key := randBytes(t, 64)
	c, err := New("aes-xts-plain64", key)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDevice(backend, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d, key
}

// independentDecrypt decrypts the data segment of ct with x/crypto/xts,
// plain64 tweak = segment offset / 512 + ivOffset.
func independentDecrypt(t testing.TB, key, ct []byte, offset, size int64, sectorSize int, ivOffset uint64) []byte {
	t.Helper()
	x, err := xts.NewCipher(aes.NewCipher, key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, size)
	for s := int64(0); s < size; s += int64(sectorSize) {
		x.Decrypt(out[s:s+int64(sectorSize)], ct[offset+s:offset+s+int64(sectorSize)], uint64(s/512)+ivOffset)
	}
	return out
}

func TestDeviceMatchesIndependentXTS(t *testing.T) {
	for _, ss := range []int{512, 4096} {
		for _, ivOff := range []uint64{0, 7} {
			t.Run(fmt.Sprintf("sector%d-iv%d", ss, ivOff), func(t *testing.T) {
				const segOff = 16 << 10
				const size = 512 << 10
				d, m, key := newTestDevice(t, segOff+size+4096, DeviceOptions{Offset: segOff, Size: size, SectorSize: ss, IVOffset: ivOff})
				if d.Size() != size || d.BlockSize() != ss {
					t.Fatalf("Size %d BlockSize %d, want %d %d", d.Size(), d.BlockSize(), size, ss)
				}
				model := make([]byte, size)
				// The backend starts as zero ciphertext; make the model match.
				copy(model, independentDecrypt(t, key, m.Bytes(), segOff, size, ss, ivOff))
				rng := mrand.New(mrand.NewPCG(1, uint64(ss)))
				writes := [][2]int{
					{0, size},          // whole, multi-chunk, parallel
					{0, 512},           // first 512 bytes
					{513, 1000},        // unaligned inside one sector
					{4095, 2},          // across a sector boundary
					{65536 - 100, 300}, // across a chunk boundary
					{size - 7, 7},      // tail of the device
					{12288, 3 * 4096},  // aligned
				}
				for range 40 {
					o := rng.IntN(size)
					writes = append(writes, [2]int{o, 1 + rng.IntN(min(size-o, 200000))})
				}
				for _, w := range writes {
					p := randBytes(t, w[1])
					orig := bytes.Clone(p)
					if n, err := d.WriteAt(p, int64(w[0])); err != nil || n != len(p) {
						t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", len(p), w[0], n, err)
					}
					if !bytes.Equal(p, orig) {
						t.Fatalf("WriteAt modified the caller's buffer")
					}
					copy(model[w[0]:], p)
				}
				ct := m.Bytes()
				if got := independentDecrypt(t, key, ct, segOff, size, ss, ivOff); !bytes.Equal(got, model) {
					t.Fatalf("backend ciphertext does not decrypt (independently) to what was written")
				}
				if !bytes.Equal(ct[:segOff], make([]byte, segOff)) || !bytes.Equal(ct[segOff+size:], make([]byte, 4096)) {
					t.Fatalf("writes landed outside the data segment")
				}
				for _, r := range append(writes, [2]int{0, size}, [2]int{1, size - 2}) {
					got := make([]byte, r[1])
					if n, err := d.ReadAt(got, int64(r[0])); err != nil || n != r[1] {
						t.Fatalf("ReadAt(%d at %d) = %d, %v", r[1], r[0], n, err)
					}
					if !bytes.Equal(got, model[r[0]:r[0]+r[1]]) {
						t.Fatalf("ReadAt(%d at %d) differs from what was written", r[1], r[0])
					}
				}
			})
		}
	}
}

func TestDeviceConcurrentSubSectorWrites(t *testing.T) {
	// Eight writers each own one 512-byte slot of every 4096-byte sector and
	// rewrite it many times while the others do the same: every
	// read-modify-write races with seven others on the same sector. Lost
	// updates would leave a slot holding an older generation.
	const ss = 4096
	const sectors = 8
	d, m, key := newTestDevice(t, sectors*ss, DeviceOptions{SectorSize: ss})
	const rounds = 60
	var wg sync.WaitGroup
	for slot := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for s := range sectors {
					p := bytes.Repeat([]byte{byte(slot*rounds + r)}, 512)
					if _, err := d.WriteAt(p, int64(s*ss+slot*512)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	// Whole-device reads run alongside.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			if _, err := d.ReadAt(make([]byte, sectors*ss), 0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	got := independentDecrypt(t, key, m.Bytes(), 0, sectors*ss, ss, 0)
	for s := range sectors {
		for slot := range 8 {
			want := bytes.Repeat([]byte{byte(slot*rounds + rounds - 1)}, 512)
			at := s*ss + slot*512
			if !bytes.Equal(got[at:at+512], want) {
				t.Fatalf("sector %d slot %d lost its last write (holds %d, want %d)", s, slot, got[at], want[0])
			}
		}
	}
}

func TestDeviceAlignedAndPartialWritesRace(t *testing.T) {
	// Whole-sector writes of generations 1..n race with partial writes of
	// byte 100. A partial write that read the sector before an aligned
	// write and wrote it back after would resurrect an older generation:
	// a reader would see the generation go backwards, and the sector could
	// end older than n.
	const ss = 4096
	const n = 200
	// Reads hold the data a while before the caller goes on, to widen
	// read-modify-write windows.
	m := devtest.NewMem(ss)
	d, key := newCryptDevice(t, devtest.NewSlow(m, time.Microsecond), DeviceOptions{SectorSize: ss})
	// Generation 0 first: the fresh backend decrypts to noise.
	if _, err := d.WriteAt(make([]byte, ss), 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		b := make([]byte, 1)
		seen := byte(0)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := d.ReadAt(b, 0); err != nil {
				t.Error(err)
				return
			}
			if b[0] < seen {
				t.Errorf("generation went back from %d to %d: a partial write undid a whole-sector write", seen, b[0])
				return
			}
			seen = b[0]
		}
	}()
	go func() {
		defer wg.Done()
		defer close(done)
		for g := 1; g <= n; g++ {
			if _, err := d.WriteAt(bytes.Repeat([]byte{byte(g)}, ss), 0); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 3 * n {
			if _, err := d.WriteAt([]byte{0xff}, 100); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	got := independentDecrypt(t, key, m.Bytes(), 0, ss, ss, 0)
	got[100] = n
	if !bytes.Equal(got, bytes.Repeat([]byte{n}, ss)) {
		t.Fatalf("a partial write undid a whole-sector write (sector holds generation %d, want %d)", got[0], n)
	}
}

func TestDeviceBackendFailure(t *testing.T) {
	const ss = 4096
	const size = 1 << 20
	m := devtest.NewMem(size)
	cut := devtest.NewFailAfter(m)
	reads := devtest.NewErring(cut)
	d, key := newCryptDevice(t, reads, DeviceOptions{SectorSize: ss})
	first := randBytes(t, size)
	if _, err := d.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	before := m.Bytes()

	// A write of several spans whose backend fails part-way returns the
	// error.
	const span = 64 << 10
	d.span = span
	cut.Writes(3, errInjected)
	second := randBytes(t, size)
	if _, err := d.WriteAt(second, 0); !errors.Is(err, errInjected) {
		t.Fatalf("WriteAt with a failing backend: err = %v, want the backend's error", err)
	}
	// Every span holds either the old or the new data, whole.
	got := independentDecrypt(t, key, m.Bytes(), 0, size, ss, 0)
	for c := 0; c < size; c += span {
		if !bytes.Equal(got[c:c+span], first[c:c+span]) && !bytes.Equal(got[c:c+span], second[c:c+span]) {
			t.Fatalf("span at %d is neither the old nor the new data", c)
		}
	}

	// A partial-sector write whose read fails writes nothing.
	cut.Heal()
	if _, err := d.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	reads.Fail(devtest.OpRead, errInjected)
	if _, err := d.WriteAt([]byte("x"), 5000); !errors.Is(err, errInjected) {
		t.Fatalf("partial write with failing reads: err = %v", err)
	}
	if _, err := d.ReadAt(make([]byte, 10), 0); !errors.Is(err, errInjected) {
		t.Fatalf("read with failing backend: err = %v", err)
	}
	if !bytes.Equal(m.Bytes(), before) {
		t.Fatalf("a failed read-modify-write changed the backend")
	}
}

func TestDeviceWriteZeroesAndTrim(t *testing.T) {
	const ss = 512
	d, m, _ := newTestDevice(t, 64<<10, DeviceOptions{SectorSize: ss})
	if d.Caps().Trim {
		t.Fatal("Caps().Trim without AllowDiscards")
	}
	if err := d.Trim(0, 4096); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("Trim without AllowDiscards: %v, want ErrNotSupported", err)
	}
	if _, err := d.WriteAt(randBytes(t, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteZeroes(100, 5000); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64<<10)
	if _, err := d.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[100:5100], make([]byte, 5000)) || bytes.Equal(got[:100], make([]byte, 100)) {
		t.Fatal("WriteZeroes did not zero exactly its range")
	}
	if bytes.Equal(m.Bytes()[512:4608], make([]byte, 4096)) {
		t.Fatal("WriteZeroes left plaintext zeroes (a hole) in the backend instead of ciphertext")
	}

	trims := devtest.NewDiscard(devtest.NewMem(64<<10), blockdev.Caps{Trim: true})
	d2, _ := newCryptDevice(t, trims, DeviceOptions{SectorSize: 4096, AllowDiscards: true})
	if !d2.Caps().Trim {
		t.Fatal("Caps().Trim false with AllowDiscards over a trimming backend")
	}
	if err := d2.Trim(100, 3*4096); err != nil {
		t.Fatal(err)
	}
	if got := trims.Trims(); len(got) != 1 || got[0] != (devtest.Range{Off: 4096, Len: 2 * 4096}) {
		t.Fatalf("backend trims %v, want only the whole sectors [4096, +8192)", got)
	}
}

func TestDeviceBoundsAndReadOnly(t *testing.T) {
	d, _, _ := newTestDevice(t, 8192, DeviceOptions{SectorSize: 512, Offset: 4096})
	if d.Size() != 4096 {
		t.Fatalf("dynamic size %d, want 4096", d.Size())
	}
	if _, err := d.WriteAt(make([]byte, 2), 4095); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end: %v", err)
	}
	if _, err := d.WriteAt(make([]byte, 1), -1); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write at negative offset: %v", err)
	}
	if n, err := d.ReadAt(make([]byte, 10), 4090); n != 6 || err == nil {
		t.Fatalf("read over the end = %d, %v; want 6, io.EOF", n, err)
	}
	ro, _, _ := newTestDevice(t, 8192, DeviceOptions{SectorSize: 512, ReadOnly: true})
	if _, err := ro.WriteAt(make([]byte, 512), 0); !errors.Is(err, blockdev.ErrReadOnly) {
		t.Fatalf("write to read-only device: %v", err)
	}
	if err := ro.WriteZeroes(0, 512); !errors.Is(err, blockdev.ErrReadOnly) {
		t.Fatalf("write zeroes to read-only device: %v", err)
	}
	c, _ := New("aes-xts-plain64", make([]byte, 64))
	for _, o := range []DeviceOptions{{SectorSize: 1000}, {SectorSize: 512, Offset: 100}, {SectorSize: 512, Offset: 1 << 20}, {SectorSize: 4096, Size: 1 << 20}} {
		if _, err := NewDevice(devtest.NewMem(8192), c, o); err == nil {
			t.Errorf("NewDevice(%+v) accepted bad options", o)
		}
	}
}

func BenchmarkDeviceRead1M(b *testing.B) {
	d, _, _ := newTestDevice(b, 8<<20, DeviceOptions{SectorSize: 4096})
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	for i := 0; b.Loop(); i++ {
		if _, err := d.ReadAt(p, int64(i%8)<<20); err != nil {
			b.Fatal(err)
		}
	}
}
