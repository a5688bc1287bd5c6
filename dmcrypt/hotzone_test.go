package dmcrypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// newCipher is spec keyed with key, for tests.
func newCipher(t *testing.T, spec string, key []byte) SectorCipher {
	t.Helper()
	c, err := New(spec, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An online reencryption runs step by step under writers that hammer the
// whole volume, the hotzone included, each reading back what it wrote at
// once: no write is lost, no read sees a sector in the wrong cipher, and
// at the end the ciphertext is the new cipher's throughout.
func TestOnlineReencryptionUnderWriters(t *testing.T) {
	for _, ss := range [][2]int{{512, 512}, {512, 4096}, {4096, 512}} {
		t.Run(fmt.Sprintf("%d-to-%d", ss[0], ss[1]), func(t *testing.T) {
			onlineUnderWriters(t, ss[0], ss[1])
		})
	}
}

func onlineUnderWriters(t *testing.T, oldSS, newSS int) {
	const dataOff, total, step, block = 1 << 20, 4 << 20, 96 << 10, 8192
	m := devtest.NewMem(dataOff + total)
	oldKey, newKey := randBytes(t, 64), randBytes(t, 32)
	d, model := deviceWithModel(t, m, newCipher(t, "aes-xts-plain64", oldKey), dataOff, oldSS)
	r, err := d.BeginReencryption(ReencryptSegment{newCipher(t, "aes-xts-plain64", oldKey), oldSS},
		ReencryptSegment{newCipher(t, "aes-cbc-essiv:sha256", newKey), newSS}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- devtest.Hammer(ctx, d, model, k, 4, block, uint64(k))
		}()
	}
	oldC, newC := newCipher(t, "aes-xts-plain64", oldKey), newCipher(t, "aes-cbc-essiv:sha256", newKey)
	rewriteOnline(r, m, dataOff, total, step, reencryptSide{oldC, oldSS}, reencryptSide{newC, newSS})
	stopWriters(t, stop, &wg, errs)
	raw := make([]byte, total)
	m.ReadAt(raw, dataOff)
	newC.Decrypt(raw, 0, newSS)
	if !bytes.Equal(raw, model) {
		t.Fatal("the ciphertext is not the model in the new cipher")
	}
	got := make([]byte, total)
	if _, err := d.ReadAt(got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("reading the reencrypted volume: %v, equal %v", err, bytes.Equal(got, model))
	}
	// Ended, the volume is one segment in the new key: it suspends and
	// resumes with that key.
	if err := d.Suspend(); !errors.Is(err, ErrSegmented) {
		t.Fatalf("Suspend before End: %v", err)
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	if err := d.Suspend(); err != nil {
		t.Fatalf("Suspend after End: %v", err)
	}
	if err := d.Resume(newCipher(t, "aes-cbc-essiv:sha256", newKey)); err != nil {
		t.Fatal(err)
	}
	clear(got)
	if _, err := d.ReadAt(got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("reading after suspend and resume: %v, equal %v", err, bytes.Equal(got, model))
	}
	if _, err := d.WriteAt(model[:block], 0); err != nil {
		t.Fatal(err)
	}
	m.ReadAt(raw[:block], dataOff)
	newC.Decrypt(raw[:block], 0, newSS)
	if !bytes.Equal(raw[:block], model[:block]) {
		t.Fatal("a write after End is not in the new cipher")
	}
}

// A hotzone whose rewrite failed is not served: its sectors may be in
// either cipher. The rest of the volume is.
func TestOnlineReencryptionAbandonedHotzone(t *testing.T) {
	m := devtest.NewMem(1<<20 + 1<<20)
	d, err := NewDevice(m, newCipher(t, "aes-xts-plain64", randBytes(t, 64)), DeviceOptions{Offset: 1 << 20, SectorSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.BeginReencryption(ReencryptSegment{newCipher(t, "aes-xts-plain64", randBytes(t, 64)), 512},
		ReencryptSegment{newCipher(t, "aes-xts-plain64", randBytes(t, 64)), 512}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Hold(0, 64<<10)
	r.Abandon()
	p := make([]byte, 4096)
	if _, err := d.ReadAt(p, 60<<10); !errors.Is(err, ErrHotzoneFailed) {
		t.Errorf("read in a failed hotzone: %v", err)
	}
	if _, err := d.WriteAt(p, 0); !errors.Is(err, ErrHotzoneFailed) {
		t.Errorf("write in a failed hotzone: %v", err)
	}
	if _, err := d.ReadAt(p, 64<<10); err != nil {
		t.Errorf("read past a failed hotzone: %v", err)
	}
	if _, err := d.BeginReencryption(ReencryptSegment{newCipher(t, "aes-xts-plain64", randBytes(t, 64)), 512},
		ReencryptSegment{newCipher(t, "aes-xts-plain64", randBytes(t, 64)), 512}, 0); err == nil {
		t.Error("a second reencryption began beside the first")
	}
}

// Scratch writes (the frontends' in-place path) go on while online
// reencryptions begin and end, one after the other, the sector size
// changing each time: whether a write is encrypted in place is decided
// inside the gate, so none lands in the old cipher beside a hotzone, or
// in the old sector size, and none is lost.
func TestScratchWritesAcrossReencryptions(t *testing.T) {
	const dataOff, total, step, block = 1 << 20, 2 << 20, 128 << 10, 4096
	m := devtest.NewMem(dataOff + total)
	type side struct {
		spec string
		key  []byte
		ss   int
	}
	sides := []side{{"aes-xts-plain64", randBytes(t, 64), 512}, {"aes-cbc-essiv:sha256", randBytes(t, 32), 4096}}
	cipherOf := func(s side) SectorCipher { return newCipher(t, s.spec, s.key) }
	d, model := deviceWithModel(t, m, cipherOf(sides[0]), dataOff, sides[0].ss)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	const writers = 4
	errs := make(chan error, writers)
	for k := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- scratchWriter(ctx, d, model, k, writers, block)
		}()
	}
	cur := 0
	for range 12 {
		old, new := sides[cur], sides[1-cur]
		r, err := d.BeginReencryption(ReencryptSegment{cipherOf(old), old.ss}, ReencryptSegment{cipherOf(new), new.ss}, 0)
		if err != nil {
			t.Fatal(err)
		}
		rewriteOnline(r, m, dataOff, total, step, reencryptSide{cipherOf(old), old.ss}, reencryptSide{cipherOf(new), new.ss})
		if err := r.End(); err != nil {
			t.Fatal(err)
		}
		cur = 1 - cur
	}
	stopWriters(t, stop, &wg, errs)
	raw := make([]byte, total)
	m.ReadAt(raw, dataOff)
	cipherOf(sides[cur]).Decrypt(raw, 0, sides[cur].ss)
	if !bytes.Equal(raw, model) {
		t.Fatal("the ciphertext is not the model in the last cipher")
	}
}

// scratchWriter is one of n writers (the kth) of whole blocks of d with
// WriteAtScratch until ctx ends, each block read back at once; model is
// kept up to date.
func scratchWriter(ctx context.Context, d *Device, model []byte, k, n, block int) error {
	got := make([]byte, block)
	for i := 0; ctx.Err() == nil; i++ {
		b := k + n*(i*7919%(len(model)/block/n))
		data := make([]byte, block)
		for j := range data {
			data[j] = byte(i + j*k)
		}
		copy(model[b*block:], data)
		if _, err := d.WriteAtScratch(data, int64(b*block)); err != nil {
			return fmt.Errorf("write of block %d: %w", b, err)
		}
		if _, err := d.ReadAt(got, int64(b*block)); err != nil {
			return fmt.Errorf("read of block %d: %w", b, err)
		}
		if !bytes.Equal(got, model[b*block:(b+1)*block]) {
			return fmt.Errorf("block %d reads back wrong right after its write", b)
		}
	}
	return nil
}

// reencryptSide is a cipher and its sector size, for rewriteOnline.
type reencryptSide struct {
	c  SectorCipher
	ss int
}

// rewriteOnline does an online reencryption job's work on m, whose data
// (total bytes at dataOff) r maps: hotzone by hotzone of step bytes,
// each held while its ciphertext is rewritten from old to new.
func rewriteOnline(r *Reencryption, m *devtest.Mem, dataOff, total, step int64, old, new reencryptSide) {
	buf := make([]byte, step)
	for done := int64(0); done < total; done += step {
		n := min(step, total-done)
		r.Hold(done, n)
		b := buf[:n]
		m.ReadAt(b, dataOff+done)
		old.c.Decrypt(b, uint64(done/512), old.ss)
		new.c.Encrypt(b, uint64(done/512), new.ss)
		m.WriteAt(b, dataOff+done)
		r.Advance(done + n)
	}
}

// stopWriters stops the writers (stop), waits for them and fails the
// test with the first error one of them sent on errs.
func stopWriters(t *testing.T, stop func(), wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// deviceWithModel is a Device over m with c, its data at dataOff to the
// end of m, filled with random bytes: the model it returns.
func deviceWithModel(t *testing.T, m *devtest.Mem, c SectorCipher, dataOff int64, ss int) (*Device, []byte) {
	t.Helper()
	d, err := NewDevice(m, c, DeviceOptions{Offset: dataOff, SectorSize: ss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	model := randBytes(t, int(m.Size()-dataOff))
	if _, err := d.WriteAt(model, 0); err != nil {
		t.Fatal(err)
	}
	return d, model
}
