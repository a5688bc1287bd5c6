package devtest

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
)

var errTest = errors.New("test error")

func TestGrowing(t *testing.T) {
	m := NewGrowing()
	if _, err := m.WriteAt([]byte("ab"), 3); err != nil {
		t.Fatal(err)
	}
	if m.Size() != 5 || !bytes.Equal(m.Bytes(), []byte{0, 0, 0, 'a', 'b'}) {
		t.Fatalf("size %d, %q", m.Size(), m.Bytes())
	}
	if _, err := m.WriteAt([]byte("x"), -1); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write at -1: %v", err)
	}
	p := make([]byte, 3)
	if n, err := m.ReadAt(p, 4); n != 1 || err != io.EOF {
		t.Fatalf("read over the end: %d %v", n, err)
	}
}

func TestFailAfterWrites(t *testing.T) {
	mem := NewMem(8)
	f := NewFailAfter(mem)
	f.Writes(2, errTest)
	for i, want := range []error{nil, nil, errTest, errTest} {
		if _, err := f.WriteAt([]byte{byte(i + 1)}, int64(i)); err != want {
			t.Fatalf("write %d: %v, want %v", i, err, want)
		}
	}
	if !bytes.Equal(mem.Bytes(), []byte{1, 2, 0, 0, 0, 0, 0, 0}) || f.Refused() != 2 {
		t.Fatalf("device %v, %d refused", mem.Bytes(), f.Refused())
	}
	if f.Flush() != nil || mem.Flushes() != 1 {
		t.Fatal("flush did not pass")
	}
	f.Heal()
	if _, err := f.WriteAt([]byte{9}, 7); err != nil || mem.Bytes()[7] != 9 {
		t.Fatalf("write after Heal: %v", err)
	}
}

// A write that does not fit the byte budget writes nothing, and nothing
// gets through after it, even a write that would fit.
func TestFailAfterBytes(t *testing.T) {
	mem := NewMem(8)
	f := NewFailAfter(mem)
	f.Bytes(5, errTest)
	if _, err := f.WriteAt([]byte{1, 1, 1}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{2, 2, 2}, 3); err != errTest {
		t.Fatalf("write over the budget: %v", err)
	}
	if _, err := f.WriteAt([]byte{3}, 7); err != errTest {
		t.Fatalf("write after the cut: %v", err)
	}
	if !bytes.Equal(mem.Bytes(), []byte{1, 1, 1, 0, 0, 0, 0, 0}) {
		t.Fatalf("device %v", mem.Bytes())
	}
}

func TestDiscard(t *testing.T) {
	mem := MemOf(bytes.Repeat([]byte{0xff}, 16))
	d := NewDiscard(mem, blockdev.Caps{WriteZeroes: true})
	if c := blockdev.CapsOf(d); c.Trim || !c.WriteZeroes {
		t.Fatalf("caps %+v, want write zeroes only", c)
	}
	if err := d.Trim(0, 4); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("trim not offered: %v", err)
	}
	if err := d.WriteZeroes(2, 3); err != nil {
		t.Fatal(err)
	}
	d = NewDiscard(mem, blockdev.Caps{Trim: true, WriteZeroes: true})
	if err := d.Trim(8, 4); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{0xff}, 16)
	clear(want[2:5])
	clear(want[8:12])
	if !bytes.Equal(mem.Bytes(), want) {
		t.Fatalf("device %x, want %x", mem.Bytes(), want)
	}
	if !slices.Equal(d.Trims(), []Range{{8, 4}}) || len(d.Zeroed()) != 0 {
		t.Fatalf("trims %v zeroed %v", d.Trims(), d.Zeroed())
	}
}

// StallIf holds only the calls it picks; Release lets them through.
func TestHoldStallIf(t *testing.T) {
	h := NewHold(NewMem(8192))
	h.StallIf(func(op ErringOp, off int64) bool { return op == OpRead && off == 0 })
	done := make(chan error)
	go func() { _, err := h.ReadAt(make([]byte, 1), 0); done <- err }()
	<-h.Entered()
	if _, err := h.ReadAt(make([]byte, 1), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte{1}, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the picked read was not held")
	case <-time.After(10 * time.Millisecond):
	}
	h.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSlowCountsReadsInFlight(t *testing.T) {
	hold := NewHold(MemOf([]byte("slow")))
	hold.Stall()
	s := NewSlow(hold, time.Millisecond)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			p := make([]byte, 4)
			if _, err := s.ReadAt(p, 0); err != nil || string(p) != "slow" {
				t.Errorf("read %q, %v", p, err)
			}
		})
	}
	for range 3 {
		<-hold.Entered() // all three are inside Slow, held below it
	}
	hold.Release()
	wg.Wait()
	if m := s.MaxInFlight(); m != 3 {
		t.Fatalf("max in flight %d, want 3", m)
	}
	if m := s.MaxInFlight(); m != 0 {
		t.Fatalf("after reset: %d", m)
	}
}

func TestBarrier(t *testing.T) {
	b := NewBarrier(NewMem(4096), 3, time.Minute)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if _, err := b.WriteAt([]byte{1}, int64(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if !b.Reached() {
		t.Fatal("three calls together did not pass the barrier")
	}
	short := NewBarrier(NewMem(4096), 2, time.Millisecond)
	if _, err := short.ReadAt(make([]byte, 1), 0); err != nil || short.Reached() {
		t.Fatalf("a lone call: %v, reached %v", err, short.Reached())
	}
}

func TestHollow(t *testing.T) {
	h := Hollow(1 << 40)
	p := []byte("keep")
	if n, err := h.ReadAt(p, 1<<39); n != 4 || err != nil || string(p) != "keep" {
		t.Fatalf("read %d %v %q", n, err, p)
	}
	if h.Size() != 1<<40 {
		t.Fatal(h.Size())
	}
}
