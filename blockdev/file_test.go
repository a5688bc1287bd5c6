package blockdev

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/internal/testtool"
)

// openTempImage opens a new zero-filled image file of size bytes, closed
// when the test ends, and returns it with its path.
func openTempImage(t *testing.T, size int64, readOnly bool) (*File, string) {
	t.Helper()
	p := testtool.Image(t, size)
	f, err := OpenFile(p, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, p
}

func TestFileReadWriteConcurrent(t *testing.T) {
	const size = 1 << 20
	f, p := openTempImage(t, size, false)
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
	_, err := f.WriteAt(make([]byte, 2), size-1)
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
	f, p := openTempImage(t, size, false)
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
	f, _ := openTempImage(t, 4096, true)
	if !CapsOf(f).ReadOnly {
		t.Fatal("Caps().ReadOnly false")
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

// directSupported reports whether the file system of dir takes O_DIRECT.
func directSupported(t *testing.T, p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Aligned requests bypass the page cache; misaligned ones (offset, length
// or buffer address) still work, through the page cache or an aligned
// bounce buffer, and all of them see each other's data.
func TestFileDirectAndMisaligned(t *testing.T) {
	const size = 1 << 20
	f, p := openTempImage(t, size, false)
	if directSupported(t, p) != f.Direct() {
		t.Fatalf("Direct() = %v, but O_DIRECT on this file system works: %v", f.Direct(), directSupported(t, p))
	}
	if !f.Direct() {
		t.Logf("the test file system has no O_DIRECT: only the buffered path is tested")
	}
	aligned := GetBuffer(8192)
	defer PutBuffer(aligned)
	for i := range aligned {
		aligned[i] = byte(i)
	}
	if _, err := f.WriteAt(aligned, 4096); err != nil {
		t.Fatal(err)
	}
	// A misaligned write into the middle, then a write from a misaligned
	// buffer address.
	if _, err := f.WriteAt([]byte("hello"), 4096+100); err != nil {
		t.Fatal(err)
	}
	odd := make([]byte, 4096+1)[1:]
	for i := range odd {
		odd[i] = 0xaa
	}
	if _, err := f.WriteAt(odd, 3*4096); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), aligned...)
	copy(want[100:], "hello")
	got := GetBuffer(8192)
	defer PutBuffer(got)
	if _, err := f.ReadAt(got, 4096); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("aligned read after a misaligned write: %v", err)
	}
	small := make([]byte, 7)
	if _, err := f.ReadAt(small, 4096+99); err != nil || string(small) != "\x63hello\x69" {
		t.Fatalf("misaligned read = %q, %v", small, err)
	}
	oddRead := make([]byte, 4096+1)[1:]
	if _, err := f.ReadAt(oddRead, 3*4096); err != nil || !bytes.Equal(oddRead, odd) {
		t.Fatalf("read into a misaligned buffer: %v", err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if !bytes.Equal(data[4096:12288], want) || !bytes.Equal(data[3*4096:4*4096], odd) {
		t.Fatal("the file does not hold the writes")
	}
}

// Reading the last, partial block of a file whose size is not aligned
// returns what is there and io.EOF.
func TestFileDirectShortTail(t *testing.T) {
	p := testtool.Image(t, 4096+1000)
	os.WriteFile(p, bytes.Repeat([]byte{7}, 4096+1000), 0o600)
	f, err := OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := GetBuffer(8192)
	defer PutBuffer(b)
	n, err := f.ReadAt(b, 0)
	if n != 4096+1000 || err != io.EOF || !bytes.Equal(b[:n], bytes.Repeat([]byte{7}, n)) {
		t.Fatalf("ReadAt = %d, %v; want 5096 bytes and io.EOF", n, err)
	}
}

// An exclusive open of an image file is refused while another holds it;
// read-only opens share it.
func TestFileExclusiveImage(t *testing.T) {
	p := testtool.Image(t, 1<<20)
	a, err := openFile(p, OpenOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Claim() != "OFD lock" {
		t.Fatalf("Claim() = %q", a.Claim())
	}
	// Through another name (a hard link) it is the same file.
	link := p + ".link"
	if err := os.Link(p, link); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, link} {
		for _, ro := range []bool{false, true} {
			_, err := openFile(name, OpenOptions{Exclusive: true, ReadOnly: ro})
			var ce *ClaimError
			if !errors.Is(err, ErrInUse) || !errors.As(err, &ce) || !errors.Is(err, unix.EBUSY) {
				t.Fatalf("second exclusive open of %s (read-only %v): %v, want ErrInUse", name, ro, err)
			}
		}
	}
	// A non-exclusive open is not stopped (as with dm-crypt).
	if c, err := OpenFile(p, true); err != nil {
		t.Fatalf("plain open: %v", err)
	} else {
		c.Close()
	}
	a.Close()
	r1, err := openFile(p, OpenOptions{Exclusive: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := openFile(p, OpenOptions{Exclusive: true, ReadOnly: true})
	if err != nil {
		t.Fatalf("two read-only opens: %v", err)
	}
	r2.Close()
	if _, err := openFile(p, OpenOptions{Exclusive: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("read-write open beside a read-only one: %v", err)
	}
}

// A FUA write is durable by itself: it settles a range a failed flush had
// lost, without a Flush; a misaligned one is written and flushed.
func TestFileWriteAtFUA(t *testing.T) {
	f, p := openTempImage(t, 1<<20, false)
	f.fail([]span{{8192, 12288}}, errors.New("lost by a flush"))
	if err := f.Flush(); !errors.Is(err, ErrLostWrites) {
		t.Fatalf("flush with a lost range: %v", err)
	}
	b := GetBuffer(4096)
	defer PutBuffer(b)
	copy(b, bytes.Repeat([]byte("fua!"), 1024))
	if _, err := f.WriteAtFUA(b, 8192); err != nil {
		t.Fatal(err)
	}
	if f.Direct() {
		// Settled by the write alone: no flush ran in between.
		if err := f.LostWrites(0, 1<<20); err != nil {
			t.Fatalf("the FUA write did not settle its range: %v", err)
		}
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAtFUA([]byte("odd"), 100); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if !bytes.Equal(data[8192:12288], b) || string(data[100:103]) != "odd" {
		t.Fatal("the FUA writes are not in the file")
	}
}
