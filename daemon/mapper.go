package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A volume's name in /dev/mapper: scripts, fstab, crypttab habits and
// unRaid's emhttp mount /dev/mapper/NAME after `cryptsetup open DEV NAME`.
//
// Where the kernel has device-mapper, /dev/mapper/NAME is a real mapping:
// one `linear` target over the whole of luksd's /dev/nbdN or /dev/ublkbN,
// with the dm uuid LUKSD-<type>-<volume uuid>-NAME, so dmsetup, lsblk
// (TYPE "luksd"), findmnt and /sys/block/dm-N/dm/name see an ordinary
// mapping, and a file system mounted there holds it as it holds a dm-crypt
// one. The linear target costs a bio remap, no copy. The daemon talks to
// /dev/mapper/control itself (dmioctl.go) rather than running dmsetup.
// Where there is no device-mapper, /dev/mapper/NAME is a symlink to the
// block device.

// MapperDir is where volumes get their names: /dev/mapper, or
// LUKSD_MAPPER_DIR; when only LUKSD_RUN_DIR is set (tests, unprivileged
// experiments), RUN_DIR/mapper, so that a test never touches the host's
// /dev/mapper.
func MapperDir() string {
	if d := os.Getenv("LUKSD_MAPPER_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("LUKSD_RUN_DIR"); d != "" {
		return filepath.Join(d, "mapper")
	}
	return "/dev/mapper"
}

// MapperPath is name's path in MapperDir.
func MapperPath(name string) string { return filepath.Join(MapperDir(), name) }

// Mapping kinds, as the state file records them.
const (
	mappingDM      = "dm"
	mappingSymlink = "symlink"
	// mappingNone: no /dev/mapper name (a named serve has no block device).
	mappingNone = "none"
)

// dmUUID is the device-mapper uuid of volume name, after cryptsetup's
// CRYPT-LUKS2-<uuid without dashes>-NAME.
func dmUUID(typ, volumeUUID, name string) string {
	u := fmt.Sprintf("LUKSD-%s-%s-%s", typ, strings.ReplaceAll(volumeUUID, "-", ""), name)
	if len(u) >= dmUUIDLen {
		u = u[:dmUUIDLen-1]
	}
	return u
}

// makeMapping gives st's kernel block device its name, st.Name, in
// MapperDir, and records how in st. With adopt (recovery), a mapping a
// dead daemon left over the same device is kept.
func makeMapping(st *State, kind string, adopt bool) error {
	if kind == mappingNone {
		return nil
	}
	if err := os.MkdirAll(MapperDir(), 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %v", MapperDir(), err)
	}
	path := MapperPath(st.Name)
	st.Mapper = path
	var kst unix.Stat_t
	if kind == mappingSymlink || unix.Stat(st.Device, &kst) != nil || kst.Mode&unix.S_IFMT != unix.S_IFBLK || !dmAvailable() {
		if kind == mappingDM {
			return fmt.Errorf("cannot map %s with device-mapper: no device-mapper here (%s)", st.Name, dmControlPath())
		}
		st.MapperKind = mappingSymlink
		return makeSymlink(path, st.Device)
	}
	st.MapperKind = mappingDM
	major, minor := unix.Major(kst.Rdev), unix.Minor(kst.Rdev)
	if adopt {
		if dev, _, _, err := dmStatus(st.Name); err == nil {
			return ensureNode(path, dev)
		}
	}
	dev, err := dmCreateLinear(st.Name, dmUUID(st.Type, st.UUID, st.Name), major, minor, uint64(st.Size/512), st.ReadOnly)
	if err != nil {
		return err
	}
	if err := ensureNode(path, dev); err != nil {
		dmRemove(st.Name, false)
		return err
	}
	return nil
}

// makeSymlink points path at target, replacing a stale link.
func makeSymlink(path, target string) error {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSymlink == 0 {
			return errorf(ErrExists, "Device %s already exists.", filepath.Base(path))
		}
		os.Remove(path)
	}
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("cannot create %s: %v", path, err)
	}
	return nil
}

// ensureNode makes sure path is the block device dev. Where udev runs it
// makes /dev/mapper/NAME (a link to ../dm-N) from the kernel's event: wait
// for it a little; without udev (initramfs, the test VM) make the node
// here, as libdevmapper does.
func ensureNode(path string, dev uint64) error {
	if _, err := os.Stat("/run/udev/control"); err == nil && MapperDir() == "/dev/mapper" {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if isBlockDev(path, dev) {
				return nil
			}
		}
	}
	if isBlockDev(path, dev) {
		return nil
	}
	os.Remove(path)
	if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(dev)); err != nil {
		return fmt.Errorf("cannot create %s: %v", path, err)
	}
	return nil
}

// isBlockDev reports whether path (through links) is block device dev.
func isBlockDev(path string, dev uint64) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == dev
}

// removeMapping removes the name st.Name was given. A dm mapping still
// open (mounted) is ErrBusy, and stays; with deferred the kernel removes it
// once it is closed (recovery after the daemon died).
func removeMapping(st *State, deferred bool) error {
	switch st.MapperKind {
	case mappingDM:
		if err := dmRemove(st.Name, deferred); err != nil && !errors.Is(err, unix.ENXIO) {
			if errors.Is(err, unix.EBUSY) {
				return errorf(ErrBusy, "Device %s is still in use.", st.Name)
			}
			return fmt.Errorf("device-mapper remove %s: %v", st.Name, err)
		}
		if fi, err := os.Lstat(st.Mapper); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			os.Remove(st.Mapper) // our own node; udev removes its links itself
		}
	case mappingSymlink:
		if target, err := os.Readlink(st.Mapper); err == nil && target == st.Device {
			os.Remove(st.Mapper)
		}
	}
	return nil
}

// UsablePath is the device to use for the volume: /dev/mapper/NAME when it
// is a dm mapping (which holds the block device below it), else the block
// device; what `luksd open` prints.
func (s *State) UsablePath() string {
	if s.MapperKind == mappingDM {
		return s.Mapper
	}
	return s.Device
}

// BusyPath is the device whose openers make the volume "in use" (mounted,
// held): the dm mapping, which itself holds the block device below it for
// as long as it exists, or else the block device.
func (s *State) BusyPath() string {
	if s.MapperKind == mappingDM {
		return s.Mapper
	}
	return s.Device
}
