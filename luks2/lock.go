package luks2

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// cryptsetup 2.6.1 serializes every LUKS2 metadata read and read-modify-write
// with flock(2) (lib/utils_device_locking.c), and luksd takes the very same
// locks so that the two tools exclude each other:
//   - on an image file, the file itself is locked;
//   - on a block device, the lock is the file LockDir/L_MAJOR:MINOR
//     (created as needed, removed by the last holder), so that every path
//     to the device (partition, loop device, dm node) meets the same lock.
//
// Readers take the shared lock, editors the exclusive one; a second editor
// waits for the first.

// LockDir is the folder of cryptsetup's block-device lock files (Debian's
// --with-luks2-lock-path).
var LockDir = "/run/cryptsetup"

// lockDirPerm is DEFAULT_LUKS2_LOCK_DIR_PERMS.
const lockDirPerm = 0o700

// ErrLocking: the lock folder cannot be used (cryptsetup's "Locking
// aborted").
var ErrLocking = errors.New("locking aborted")

// Lock is a held metadata lock on one header device.
type Lock struct {
	f   *os.File
	res string // the lock file of a block device; "" for an image file
}

// LockHeader takes the shared (exclusive false) or exclusive lock on the
// header device at path, waiting while another process holds a conflicting
// one.
func LockHeader(path string, exclusive bool) (*Lock, error) {
	return lockHandle(path, exclusive, func() (*Lock, error) { return openLockHandle(path) })
}

// LockNamed takes the shared or exclusive metadata lock of a header
// device that has no local path to lock (a volume in a remote store):
// the file LockDir/res, created as needed and removed by its last holder,
// as a block device's. It excludes the processes of this host only.
func LockNamed(res string, exclusive bool) (*Lock, error) {
	return lockHandle(res, exclusive, func() (*Lock, error) {
		f, err := openLockFile(res)
		if err != nil {
			return nil, err
		}
		return &Lock{f: f, res: f.Name()}, nil
	})
}

// lockHandle flocks what open returns for what, waiting while another
// process holds a conflicting lock.
func lockHandle(what string, exclusive bool, open func() (*Lock, error)) (*Lock, error) {
	op := unix.LOCK_SH
	if exclusive {
		op = unix.LOCK_EX
	}
	for {
		l, err := open()
		if err != nil {
			return nil, err
		}
		if err := flock(l.f, op); err != nil {
			l.release()
			return nil, fmt.Errorf("flock %s: %w", what, err)
		}
		// Another holder may have removed the lock file between our open
		// and our flock (see release): then lock the new one.
		if l.verified() {
			return l, nil
		}
		flock(l.f, unix.LOCK_UN)
		l.release()
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	flock(l.f, unix.LOCK_UN)
	return l.release()
}

// openLockHandle opens what is flocked for path, as cryptsetup's
// acquire_lock_handle does.
func openLockHandle(path string) (*Lock, error) {
	dev, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(dev.Fd()), &st); err != nil {
		dev.Close()
		return nil, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		dev.Close()
		res := fmt.Sprintf("L_%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		f, err := openLockFile(res)
		if err != nil {
			return nil, err
		}
		return &Lock{f: f, res: filepath.Join(LockDir, res)}, nil
	case unix.S_IFREG:
		// A read-write descriptor where possible (NFSv4 needs one to lock).
		if rw, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			dev.Close()
			return &Lock{f: rw}, nil
		}
		return &Lock{f: dev}, nil
	}
	dev.Close()
	return nil, fmt.Errorf("%s is neither a regular file nor a block device", path)
}

// openLockFile opens (creating) LockDir/res, creating LockDir as needed.
func openLockFile(res string) (*os.File, error) {
	dir, base := filepath.Split(filepath.Clean(LockDir))
	parent, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: the locking path %s is unusable (not a directory or missing)", ErrLocking, LockDir)
	}
	defer unix.Close(parent)
	const dirFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_DIRECTORY | unix.O_CLOEXEC
	d, err := unix.Openat(parent, base, dirFlags, 0)
	if err == unix.ENOENT {
		if err := unix.Mkdirat(parent, base, lockDirPerm); err != nil && err != unix.EEXIST {
			return nil, fmt.Errorf("%w: cannot create %s: %v", ErrLocking, LockDir, err)
		}
		d, err = unix.Openat(parent, base, dirFlags, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the locking path %s is unusable (%v)", ErrLocking, LockDir, err)
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, res, unix.O_CREAT|unix.O_NOFOLLOW|unix.O_RDWR|unix.O_CLOEXEC, 0o777)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocking, filepath.Join(LockDir, res), err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(LockDir, res)), nil
}

// verified reports whether a block device's lock file is still the one we
// locked (an image file's lock is the file itself).
func (l *Lock) verified() bool {
	if l.res == "" {
		return true
	}
	return sameFile(l.f, l.res)
}

// release closes the handle. The holder of a block device's lock file
// removes it when nobody else holds it, as cryptsetup does; a process that
// opened it meanwhile notices in verified and retries.
func (l *Lock) release() error {
	if l.res != "" && flock(l.f, unix.LOCK_EX|unix.LOCK_NB) == nil && sameFile(l.f, l.res) {
		os.Remove(l.res)
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func flock(f *os.File, op int) error {
	for {
		err := unix.Flock(int(f.Fd()), op)
		if err != unix.EINTR {
			return err
		}
	}
}
