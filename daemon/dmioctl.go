package daemon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The device-mapper control interface (linux/dm-ioctl.h), spoken directly
// over /dev/mapper/control: luksd needs five commands to put a linear
// mapping over its block device, and talking to the kernel itself keeps it
// free of dmsetup/libdevmapper (an unRaid or initramfs system may lack
// them) and of waiting for udev cookies.
const (
	dmIoctlSize    = 312 // struct dm_ioctl
	dmSpecSize     = 40  // struct dm_target_spec
	dmNameLen      = 128
	dmUUIDLen      = 129
	dmOffName      = 48
	dmOffUUID      = dmOffName + dmNameLen
	dmReadOnlyFlag = 1 << 0
	dmSuspendFlag  = 1 << 1
	dmDeferredFlag = 1 << 17 // DM_DEFERRED_REMOVE: remove once the last opener closes
)

// ioctl numbers: _IOWR(0xfd, nr, struct dm_ioctl).
const (
	dmVersion   = 0
	dmDevCreate = 3
	dmDevRemove = 4
	dmDevSusp   = 6
	dmDevStatus = 7
	dmTableLoad = 9
)

func dmIoctlNumber(nr uintptr) uintptr {
	return 3<<30 | dmIoctlSize<<16 | 0xfd<<8 | nr
}

// dmRequest is one dm_ioctl with its payload (a target table).
type dmRequest struct {
	name, uuid  string
	flags       uint32
	targets     int
	payload     []byte
	dev         uint64 // out: the mapped device's dev_t
	openCount   int32  // out
	targetCount uint32 // out
}

// marshal lays the request out as the kernel reads it.
func (r *dmRequest) marshal() ([]byte, error) {
	if len(r.name) >= dmNameLen || len(r.uuid) >= dmUUIDLen {
		return nil, fmt.Errorf("device-mapper name or uuid too long: %q", r.name)
	}
	// Room for the kernel's answer (a status payload) after the header.
	size := dmIoctlSize + len(r.payload) + 4096
	b := make([]byte, size)
	le := binary.NativeEndian
	le.PutUint32(b[0:], 4) // interface version 4.0.0
	le.PutUint32(b[12:], uint32(size))
	le.PutUint32(b[16:], dmIoctlSize)
	le.PutUint32(b[20:], uint32(r.targets))
	le.PutUint32(b[28:], r.flags)
	copy(b[dmOffName:], r.name)
	copy(b[dmOffUUID:], r.uuid)
	copy(b[dmIoctlSize:], r.payload)
	return b, nil
}

// linearTable is the payload of one linear target: sectors 0..sectors-1
// mapped onto device major:minor from its sector 0.
func linearTable(sectors uint64, major, minor uint32) []byte {
	params := fmt.Sprintf("%d:%d 0", major, minor)
	n := (dmSpecSize + len(params) + 1 + 7) &^ 7 // params NUL-terminated, 8-aligned
	b := make([]byte, n)
	le := binary.NativeEndian
	le.PutUint64(b[0:], 0)
	le.PutUint64(b[8:], sectors)
	copy(b[24:40], "linear")
	copy(b[dmSpecSize:], params)
	return b
}

// dmControlPath is the control node, in the mapper directory.
func dmControlPath() string { return MapperDir() + "/control" }

// dmCall runs one device-mapper command.
func dmCall(cmd uintptr, r *dmRequest) error {
	f, err := os.OpenFile(dmControlPath(), os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := r.marshal()
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), dmIoctlNumber(cmd), uintptr(unsafe.Pointer(&b[0])))
	if errno != 0 {
		return errno
	}
	le := binary.NativeEndian
	r.dev = le.Uint64(b[40:])
	r.openCount = int32(le.Uint32(b[24:]))
	r.targetCount = le.Uint32(b[20:])
	r.uuid = string(bytes.TrimRight(b[dmOffUUID:dmOffUUID+dmUUIDLen], "\x00"))
	return nil
}

// dmAvailable reports whether the kernel has device-mapper (the control
// node answers DM_VERSION).
func dmAvailable() bool {
	return dmCall(dmVersion, &dmRequest{}) == nil
}

// dmCreateLinear creates name (with uuid) as one linear target over
// major:minor, sectors long, and activates it. It returns the new device's
// dev_t. A half-made device is removed again.
func dmCreateLinear(name, uuid string, major, minor uint32, sectors uint64, readOnly bool) (uint64, error) {
	var flags uint32
	if readOnly {
		flags = dmReadOnlyFlag
	}
	if err := dmCall(dmDevCreate, &dmRequest{name: name, uuid: uuid, flags: flags}); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return 0, errorf(ErrExists, "Device %s already exists.", name)
		}
		return 0, fmt.Errorf("device-mapper create %s: %v", name, err)
	}
	load := &dmRequest{name: name, flags: flags, targets: 1, payload: linearTable(sectors, major, minor)}
	if err := dmCall(dmTableLoad, load); err != nil {
		dmCall(dmDevRemove, &dmRequest{name: name})
		return 0, fmt.Errorf("device-mapper table for %s: %v", name, err)
	}
	resume := &dmRequest{name: name}
	if err := dmCall(dmDevSusp, resume); err != nil { // without dmSuspendFlag: resume
		dmCall(dmDevRemove, &dmRequest{name: name})
		return 0, fmt.Errorf("device-mapper resume %s: %v", name, err)
	}
	return resume.dev, nil
}

// dmStatus returns name's dev_t, uuid and open count; unix.ENXIO when
// there is no such device.
func dmStatus(name string) (dev uint64, uuid string, open int32, err error) {
	r := &dmRequest{name: name}
	if err := dmCall(dmDevStatus, r); err != nil {
		return 0, "", 0, err
	}
	return r.dev, r.uuid, r.openCount, nil
}

// dmRemove removes name; deferred, the kernel removes it once its last
// opener closes it (EBUSY otherwise while it is open).
func dmRemove(name string, deferred bool) error {
	var flags uint32
	if deferred {
		flags = dmDeferredFlag
	}
	return dmCall(dmDevRemove, &dmRequest{name: name, flags: flags})
}
