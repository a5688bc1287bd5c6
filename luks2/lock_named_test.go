package luks2

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// useLockDir points LockDir at dir for the test.
func useLockDir(t *testing.T, dir string) {
	old := LockDir
	LockDir = dir
	t.Cleanup(func() { LockDir = old })
}

// A named lock (a remote volume's) excludes as a block device's does: a
// reader waits for the editor, and the last holder removes the file.
func TestLockNamedExcludes(t *testing.T) {
	useLockDir(t, filepath.Join(t.TempDir(), "cryptsetup"))
	const name = "L_luksd-test"
	editor, err := LockNamed(name, true)
	mustNil(t, err)
	got := make(chan *Lock)
	go func() {
		l, err := LockNamed(name, false)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("a reader took the named lock while an editor held it")
	case <-time.After(300 * time.Millisecond):
	}
	mustNil(t, editor.Unlock())
	reader := <-got
	mustNil(t, reader.Unlock())
	if _, err := os.Stat(filepath.Join(LockDir, name)); !os.IsNotExist(err) {
		t.Fatalf("lock file left after the last holder: %v", err)
	}
}

// refreshFile is a header File that counts its refreshes.
type refreshFile struct {
	memDevice
	refreshes int
}

func (f *refreshFile) Refresh() error             { f.refreshes++; return nil }
func (f *refreshFile) Close() error               { return nil }
func (f *refreshFile) Sync() error                { return nil }
func (f *refreshFile) Stat() (os.FileInfo, error) { return nil, errors.ErrUnsupported }
func (f *refreshFile) Truncate(size int64) error  { return errors.ErrUnsupported }

// A remote volume's header device forgets its cached reads each time it
// takes its lock, and only then: a read or an edit starts from what the
// store holds, and reads inside one lock cost no more round trips.
func TestHeaderFileRefreshesUnderItsLock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lockDir func(t *testing.T) string
	}{
		{"lock folder", func(t *testing.T) string { return filepath.Join(t.TempDir(), "cryptsetup") }},
		// A folder this user cannot use (here: a file in its place) leaves
		// the volume unlocked, as --disable-locks, and still refreshed.
		{"no lock folder", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			mustNil(t, os.WriteFile(p, nil, 0o600))
			return filepath.Join(p, "cryptsetup")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			useLockDir(t, tc.lockDir(t))
			f := &refreshFile{memDevice: make(memDevice, 1<<20)}
			d := &HeaderFile{File: f, Path: "s3://bucket/vol", Size: 1 << 20, LockName: "L_luksd-test"}
			var b [512]byte
			_, err := d.ReadAt(b[:], 0)
			mustNil(t, err)
			if f.refreshes != 1 {
				t.Fatalf("a read outside a lock refreshed %d times, want 1", f.refreshes)
			}
			err = d.Edit(func() error {
				if _, err := d.ReadAt(b[:], 4096); err != nil {
					return err
				}
				return d.Locked(false, func() error { _, err := d.WriteAt(b[:], 0); return err })
			})
			mustNil(t, err)
			if f.refreshes != 2 {
				t.Fatalf("after an edit with reads inside it: %d refreshes, want 2", f.refreshes)
			}
		})
	}
}
