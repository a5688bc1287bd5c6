package devtest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/luksd/luksd/blockdev"
)

func TestMem(t *testing.T) {
	m := NewMem(8)
	if _, err := m.WriteAt([]byte("abc"), 6); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end: %v", err)
	}
	if _, err := m.WriteAt([]byte("abc"), 5); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4)
	if n, err := m.ReadAt(p, 6); n != 2 || err != io.EOF || string(p[:2]) != "bc" {
		t.Fatalf("short read: %d %v %q", n, err, p[:n])
	}
	m.Flush()
	m.Close()
	if m.Flushes() != 1 || !m.Closed() {
		t.Fatalf("flushes %d closed %v", m.Flushes(), m.Closed())
	}
	if _, err := m.ReadAt(p, 0); err == nil {
		t.Fatal("read after close succeeded")
	}
}

// recordSample records a write, a flush, two writes and a flush on a
// 4-byte device of zeroes, which it returns with the recorder.
func recordSample() (before []byte, r *Recorder) {
	before = make([]byte, 4)
	r = NewRecorder(MemOf(before))
	r.WriteAt([]byte{1}, 0)
	r.Flush()
	r.WriteAt([]byte{2}, 1)
	r.WriteAt([]byte{3}, 2)
	r.Flush()
	return before, r
}

func TestRecorder(t *testing.T) {
	before, r := recordSample()
	if r.Writes() != 3 || len(r.Ops()) != 5 {
		t.Fatalf("ops %+v", r.Ops())
	}
	for n, want := range [][]byte{{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 2, 0, 0}, {1, 2, 3, 0}} {
		if got := r.Persisted(before, n); !bytes.Equal(got, want) {
			t.Errorf("Persisted(%d) = %v, want %v", n, got, want)
		}
	}
	for n, want := range [][]byte{{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}} {
		if got := r.Durable(before, n); !bytes.Equal(got, want) {
			t.Errorf("Durable(%d) = %v, want %v", n, got, want)
		}
	}
}
