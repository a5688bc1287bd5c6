package blockdev

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func tempImage(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileReadWriteConcurrent(t *testing.T) {
	const size = 1 << 20
	p := tempImage(t, size)
	f, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != size {
		t.Fatalf("Size = %d, want %d", f.Size(), size)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := bytes.Repeat([]byte{byte(i + 1)}, 64<<10)
			if _, err := f.WriteAt(b, int64(i)*64<<10); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	for i := range 16 {
		if !bytes.Equal(data[i*64<<10:(i+1)*64<<10], bytes.Repeat([]byte{byte(i + 1)}, 64<<10)) {
			t.Fatalf("region %d does not hold its write", i)
		}
	}
	got := make([]byte, 10)
	if _, err := f.ReadAt(got, 5*64<<10); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{6}, 10)) {
		t.Fatalf("ReadAt = %v, %v", got, err)
	}
	_, err = f.WriteAt(make([]byte, 2), size-1)
	var oe *OpError
	if !errors.Is(err, ErrOutOfRange) || !errors.As(err, &oe) || oe.Path != p || oe.Off != size-1 {
		t.Fatalf("write past the end: %v (want ErrOutOfRange naming the path and offset)", err)
	}
	if fi, _ := os.Stat(p); fi.Size() != size {
		t.Fatalf("file grew to %d", fi.Size())
	}
}

func TestFileTrimAndZeroes(t *testing.T) {
	const size = 1 << 20
	p := tempImage(t, size)
	f, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, size), 0); err != nil {
		t.Fatal(err)
	}
	blocksBefore := allocated(t, p)
	if err := f.Trim(256<<10, 512<<10); err != nil {
		if errors.Is(err, ErrNotSupported) {
			t.Skipf("SKIP (not a pass): the test file system cannot punch holes: %v", err)
		}
		t.Fatal(err)
	}
	if after := allocated(t, p); after >= blocksBefore {
		t.Fatalf("Trim did not release space: %d -> %d blocks", blocksBefore, after)
	}
	if err := f.WriteZeroes(100, 1000); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if !bytes.Equal(data[256<<10:768<<10], make([]byte, 512<<10)) {
		t.Fatal("trimmed range does not read as zeroes")
	}
	if !bytes.Equal(data[100:1100], make([]byte, 1000)) || data[99] != 0xff || data[1100] != 0xff {
		t.Fatal("WriteZeroes did not zero exactly its range")
	}
	if len(data) != size {
		t.Fatalf("size changed to %d", len(data))
	}
}

func allocated(t *testing.T, p string) int64 {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks
}

func TestFileReadOnlyAndErrors(t *testing.T) {
	p := tempImage(t, 4096)
	f, err := OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.ReadOnly() {
		t.Fatal("ReadOnly() false")
	}
	if _, err := f.WriteAt([]byte{1}, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to read-only file: %v", err)
	}
	if err := f.Trim(0, 512); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("trim of read-only file: %v", err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing"), false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := OpenFile(t.TempDir(), true); err == nil {
		t.Fatal("opened a directory as a device")
	}
}
