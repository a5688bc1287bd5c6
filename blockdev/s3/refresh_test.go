package s3

import (
	"bytes"
	"testing"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// A volume keeps the chunks it read; Refresh makes it read again what
// another writer has put in the store since, and keeps its own writes
// not yet uploaded.
func TestRefreshSeesOtherWriters(t *testing.T) {
	srv := s3test.Start(t)
	writer, st := newVolume(t, srv, 4*testChunk)
	other, err := OpenVolume(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	write := func(v *Volume, b byte) []byte {
		p := bytes.Repeat([]byte{b}, 4096)
		if _, err := v.WriteAt(p, 512); err != nil {
			t.Fatal(err)
		}
		flush(t, v)
		return p
	}
	read := func(v *Volume) []byte {
		p := make([]byte, 4096)
		if _, err := v.ReadAt(p, 512); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write(writer, 'a')
	if got := read(other); !bytes.Equal(got, first) {
		t.Fatalf("read %q..., want the first write", got[:4])
	}
	second := write(writer, 'b')
	if got := read(other); !bytes.Equal(got, first) {
		t.Fatalf("the cached chunk read %q...: this test needs a volume that keeps what it read", got[:4])
	}
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := read(other); !bytes.Equal(got, second) {
		t.Fatalf("after Refresh: read %q..., want the other writer's second write", got[:4])
	}
	// Its own write, uploaded or not, survives a refresh.
	own := bytes.Repeat([]byte{'c'}, 4096)
	if _, err := other.WriteAt(own, 512); err != nil {
		t.Fatal(err)
	}
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := read(other); !bytes.Equal(got, own) {
		t.Fatalf("after Refresh: read %q..., want the volume's own write", got[:4])
	}
}
