package daemon

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon/frontend"
	"golang.org/x/sys/unix"
)

// Resize (cryptsetup resize NAME [--device-size]): "resize N" on the
// control socket sets the volume's size to N bytes, 0 meaning to the end
// of the data device as it is now (after its image file or block device
// grew or shrank). The daemon holds the key already, so no key travels:
// as cryptsetup, which asks for a passphrase only when the volume key
// lives in the kernel keyring, and luksd's never does. The layers follow
// in the order that never lets a request reach past an end: growing, the
// data device is measured again, then the crypt layer, the kernel device
// and the /dev/mapper mapping grow; shrinking, the other way round.

// liveDevice is the crypt layer as resize and refresh see it
// (*dmcrypt.Device).
type liveDevice interface {
	Size() int64
	Resize(size int64) error
	Backend() blockdev.Device
	CanDiscard() bool
	SetDiscards(on bool) error
}

// liveControl changes a running volume's size (here) and discard
// setting (discards.go).
type liveControl struct {
	st   *State
	dev  liveDevice
	att  frontend.Attachment
	keys *keyControl // its lock also guards st; nil without a crypt layer
	mu   sync.Mutex  // one change at a time
}

// newLiveControl returns vol's live control, or nil when what it serves
// is not a crypt layer (tests).
func newLiveControl(st *State, vol opened, att frontend.Attachment) *liveControl {
	dev, ok := vol.dev.(liveDevice)
	if !ok {
		return nil
	}
	return &liveControl{st: st, dev: dev, att: att, keys: vol.keys}
}

// answer answers "resize N" and "discards on|off" on conn; it reports
// whether line was one of them.
func (r *liveControl) answer(conn net.Conn, line string) bool {
	cmd, arg, _ := strings.Cut(line, " ")
	var err error
	switch cmd {
	case "resize":
		size, perr := strconv.ParseInt(arg, 10, 64)
		if perr != nil || size < 0 {
			err = fmt.Errorf("bad size %q", arg)
			break
		}
		err = r.locked(func() error { return r.resize(size) })
	case "discards":
		if arg != "on" && arg != "off" {
			err = fmt.Errorf("bad discards setting %q", arg)
			break
		}
		err = r.locked(func() error { return r.setDiscards(arg == "on") })
	default:
		return false
	}
	defer conn.Close()
	if err != nil {
		fmt.Fprintln(conn, "error: "+oneLine(err))
		return true
	}
	fmt.Fprintln(conn, ctlOK)
	return true
}

// locked runs change alone, with the state locked and the volume not
// suspended.
func (r *liveControl) locked(change func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys != nil {
		r.keys.mu.Lock()
		defer r.keys.mu.Unlock()
		if r.keys.dev.Suspended() {
			return errorf(ErrInvalid, "Volume %s is suspended.", r.st.Name)
		}
	}
	return change()
}

// resize sets the volume's size to size bytes (0: to the end of the data
// device), with cryptsetup's checks and messages.
func (r *liveControl) resize(size int64) error {
	size, err := r.target(size)
	if err != nil {
		return err
	}
	old := r.dev.Size()
	if size == old {
		return nil // refresh asks whenever it runs
	}
	resizer, ok := r.att.(frontend.Resizer)
	if !ok {
		return errorf(ErrInvalid, "luksd cannot resize %s while it is attached (Linux 6.12's %s has no live size update); close and open %s again.",
			r.st.Device, r.st.Frontend, r.st.Name)
	}
	if size > old {
		err = r.grow(resizer, old, size)
	} else {
		err = r.shrink(resizer, old, size)
	}
	if err != nil {
		return err
	}
	r.st.Size = size
	Log.Printf("%s: resized from %d to %d bytes", r.st.Name, old, size)
	if err := writeState(r.st); err != nil {
		return fmt.Errorf("cannot write the state file: %v", err)
	}
	return nil
}

// target measures the data device again and checks size against it as
// cryptsetup's device_block_adjust does; it returns the size to take.
func (r *liveControl) target(size int64) (int64, error) {
	below := r.dev.Backend()
	devSize := below.Size()
	if m, ok := below.(blockdev.Remeasurer); ok {
		var err error
		if devSize, err = m.Remeasure(); err != nil {
			return 0, err
		}
	}
	offset := r.st.Offset
	if offset >= devSize {
		return 0, errorf(ErrInvalid, "Requested offset is beyond real size of device %s.", r.st.Image)
	}
	if size == 0 {
		size = devSize - offset
	}
	if size > devSize-offset {
		return 0, errorf(ErrInvalid, "Device %s is too small.", r.st.Image)
	}
	if size%int64(r.st.SectorSize) != 0 {
		return 0, errorf(ErrInvalid, "Device size is not aligned to requested sector size.")
	}
	return size, nil
}

// grow enlarges the crypt layer, then the kernel device, then the mapping
// over it; a failure puts back what was changed.
func (r *liveControl) grow(k frontend.Resizer, old, size int64) error {
	if err := r.dev.Resize(size); err != nil {
		return err
	}
	if err := k.Resize(old, size); err != nil {
		r.dev.Resize(old)
		return err
	}
	if err := r.reloadMapping(size); err != nil {
		k.Resize(size, old)
		r.dev.Resize(old)
		return err
	}
	return nil
}

// shrink makes the mapping smaller first, then the kernel device, then
// the crypt layer.
func (r *liveControl) shrink(k frontend.Resizer, old, size int64) error {
	if err := r.reloadMapping(size); err != nil {
		return err
	}
	if err := k.Resize(old, size); err != nil {
		r.reloadMapping(old)
		return err
	}
	return r.dev.Resize(size)
}

// reloadMapping gives the /dev/mapper/NAME linear mapping the new size
// (a symlink needs nothing).
func (r *liveControl) reloadMapping(size int64) error {
	if r.st.MapperKind != mappingDM {
		return nil
	}
	var kst unix.Stat_t
	if err := unix.Stat(r.st.Device, &kst); err != nil {
		return fmt.Errorf("cannot resize %s: %v", r.st.Mapper, err)
	}
	return dmReloadLinear(r.st.Name, unix.Major(kst.Rdev), unix.Minor(kst.Rdev), uint64(size/512), r.st.ReadOnly)
}

// dmReloadLinear loads a linear table of sectors over major:minor into
// name's inactive slot and resumes it, which swaps it in (the kernel
// suspends the mapping for the swap, flushing what is in flight).
func dmReloadLinear(name string, major, minor uint32, sectors uint64, readOnly bool) error {
	var flags uint32
	if readOnly {
		flags = dmReadOnlyFlag
	}
	load := &dmRequest{name: name, flags: flags, targets: 1, payload: linearTable(sectors, major, minor)}
	if err := dmCall(dmTableLoad, load); err != nil {
		return fmt.Errorf("device-mapper table for %s: %v", name, err)
	}
	if err := dmCall(dmDevSusp, &dmRequest{name: name}); err != nil {
		return fmt.Errorf("device-mapper resume %s: %v", name, err)
	}
	return nil
}

// Resize asks name's daemon to take size bytes (0: to the end of the data
// device). Refusals come back in cryptsetup's words as ErrInvalid.
func Resize(name string, size int64) error {
	return askLive(name, fmt.Sprintf("resize %d", size))
}

// askLive sends one of liveControl's commands to name's daemon.
func askLive(name, cmd string) error {
	if !Alive(name) {
		return errorf(ErrNotActive, "Device %s is not active.", name)
	}
	reply, err := askDaemon(name, cmd)
	switch {
	case err != nil:
		return fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
	case reply == ctlOK:
		return nil
	case strings.HasPrefix(reply, "error: "):
		return errorf(ErrInvalid, "%s", strings.TrimPrefix(reply, "error: "))
	}
	return fmt.Errorf("%s %s: unexpected reply %q", cmd, name, reply)
}
