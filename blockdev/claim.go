package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Exclusive use. Two writers on one ciphertext corrupt it silently, so an
// open volume claims its backing device for as long as it is open, the way
// the kernel's dm-crypt does:
//
//   - A block device is opened with O_EXCL. The kernel then refuses every
//     other exclusive opener: mount, dm-crypt (cryptsetup open), md, swapon,
//     mkfs and another luksd; it refuses our claim while any of them holds
//     the device. A loop device's backing file is locked as well (see
//     below), so a second loop device over the same file, or the file
//     itself, cannot be opened by another luksd either.
//   - A regular file gets an open-file-description write lock over all of
//     it (fcntl F_OFD_SETLK; a read lock when opened read-only, so
//     read-only opens may share an image). Another luksd, or qemu, which
//     takes OFD locks too, is refused. flock(2) locks are separate from
//     these, so cryptsetup's metadata lock (a flock on the header device,
//     taken by luksAddKey and friends) still works while the volume is open.
//     A file that a loop device is attached to is refused: whoever set the
//     loop device up may be using it.
//
// What a claim cannot stop: plain (non-exclusive) opens of the device, as
// with dm-crypt, and a loop device set up over an image after it was
// claimed: the loop driver does not look at locks, and `cryptsetup open
// IMAGE` sets one up by itself.

// ClaimError says that a device is in use; errors.Is(err, ErrInUse) holds.
type ClaimError struct {
	Path   string
	Holder string // who or what holds it, as far as can be told
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("%s: %v (%s)", e.Path, ErrInUse, e.Holder)
}

func (e *ClaimError) Unwrap() error { return ErrInUse }

// takeClaim claims d after openDirect has opened it (O_EXCL for a block
// device).
func (d *fileIO) takeClaim() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	if d.isBlock {
		backing, ok := loopBacking(d.fd, st.Rdev)
		if !ok {
			return nil
		}
		f, err := os.OpenFile(backing, d.openFlag(), 0)
		if err != nil {
			return nil // moved or not ours to open: the loop device is held all the same
		}
		d.backing = f
		if err := d.lock(f, backing); err != nil {
			return &ClaimError{Path: d.path, Holder: "its backing file " + backing + " is in use by another program"}
		}
		return nil
	}
	if err := d.lock(d.f, d.path); err != nil {
		return err
	}
	d.claim = "OFD lock"
	if loop := loopOver(uint64(st.Dev), st.Ino); loop != "" {
		return &ClaimError{Path: d.path, Holder: "attached to " + loop}
	}
	return nil
}

// lock takes an OFD lock over all of f: a write lock, or a read lock when
// d is read-only.
func (d *fileIO) lock(f *os.File, path string) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if d.readOnly {
		lk.Type = unix.F_RDLCK
	}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return &ClaimError{Path: path, Holder: "locked by another program"}
		}
		return &os.PathError{Op: "lock", Path: path, Err: err}
	}
	return nil
}

// loopBacking returns the backing file of the loop device open as fd
// (device number rdev), when it is one and is bound.
func loopBacking(fd int, rdev uint64) (string, bool) {
	info, err := unix.IoctlLoopGetStatus64(fd)
	if err != nil {
		return "", false
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d/loop/backing_file", unix.Major(rdev), unix.Minor(rdev))
	b, err := os.ReadFile(sys)
	if err != nil {
		return "", false
	}
	path := strings.TrimSpace(string(b))
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || uint64(st.Dev) != info.Device || st.Ino != info.Inode {
		return "", false // renamed or deleted since: nothing to check by name
	}
	return path, true
}

// loopOver returns a loop device (/dev/loopN) whose backing file is the
// file with device number dev and inode ino, or "".
func loopOver(dev, ino uint64) string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		name := filepath.Base(filepath.Dir(filepath.Dir(f)))
		node := "/dev/" + name
		if lf, err := os.Open(node); err == nil {
			info, err := unix.IoctlLoopGetStatus64(int(lf.Fd()))
			lf.Close()
			if err == nil && info.Device == dev && info.Inode == ino {
				return node
			}
			continue
		}
		// No device node to ask: compare the file sysfs names.
		b, err := os.ReadFile(f)
		var st unix.Stat_t
		if err == nil && unix.Stat(strings.TrimSpace(string(b)), &st) == nil && uint64(st.Dev) == dev && st.Ino == ino {
			return node
		}
	}
	return ""
}
