package ublk

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ControlPath is the node ublk_drv creates for control commands, where
// Options.Control points unless it is set.
const ControlPath = "/dev/ublk-control"

// ErrNoUblk reports a kernel without ublk (no ublk_drv, or no io_uring).
var ErrNoUblk = errors.New("ublk is not available on this kernel")

// control sends commands to /dev/ublk-control over its own io_uring.
type control struct {
	mu      sync.Mutex
	fd      int
	ring    *ring
	encoded bool   // ioctl-encoded commands (UBLK_U_CMD_*) are understood
	feats   uint64 // what GET_FEATURES reported; 0 on kernels before 6.5
}

var cmdNames = map[uint32]string{
	cmdGetQueueAffinity:  "GET_QUEUE_AFFINITY",
	cmdGetDevInfo:        "GET_DEV_INFO",
	cmdAddDev:            "ADD_DEV",
	cmdDelDev:            "DEL_DEV",
	cmdStartDev:          "START_DEV",
	cmdStopDev:           "STOP_DEV",
	cmdSetParams:         "SET_PARAMS",
	cmdGetParams:         "GET_PARAMS",
	cmdStartUserRecovery: "START_USER_RECOVERY",
	cmdEndUserRecovery:   "END_USER_RECOVERY",
	cmdGetFeatures:       "GET_FEATURES",
	cmdDelDevAsync:       "DEL_DEV_ASYNC",
}

// CommandError is a control command the kernel refused.
type CommandError struct {
	Command string // e.g. "ADD_DEV"
	Dev     int    // device id, -1 when none
	Err     unix.Errno
}

func (e *CommandError) Error() string {
	if e.Dev >= 0 {
		return fmt.Sprintf("ublk %s (device %d): %v", e.Command, e.Dev, e.Err)
	}
	return fmt.Sprintf("ublk %s: %v", e.Command, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// openControl opens the control node at path ("" = ControlPath) and learns
// which command encoding the kernel speaks.
func openControl(path string) (*control, error) {
	if path == "" {
		path = ControlPath
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			return nil, fmt.Errorf("%w: %s is missing (load ublk_drv, Linux 6.0 or later)", ErrNoUblk, path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := newRing(4)
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, errNoRing) {
			return nil, fmt.Errorf("%w: %v", ErrNoUblk, err)
		}
		return nil, err
	}
	c := &control{fd: fd, ring: r, encoded: true}
	var feats uint64
	err = c.do(cmdGetFeatures, ctrlCmd{devID: ^uint32(0), queueID: 0xffff, len: featuresLen, addr: uint64(uintptr(unsafe.Pointer(&feats)))}, unsafe.Pointer(&feats))
	var ce *CommandError
	switch {
	case err == nil:
		c.feats = feats
	case errors.As(err, &ce) && ce.Err != unix.EPERM && ce.Err != unix.EACCES:
		// before Linux 6.5: no GET_FEATURES, legacy command numbers
		c.encoded = false
	default:
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *control) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring != nil {
		c.ring.close()
		c.ring = nil
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// do sends one command and waits for its result. buf is the memory the
// command's addr points at, kept alive until the kernel is done with it.
func (c *control) do(nr uint32, cmd ctrlCmd, buf unsafe.Pointer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring == nil {
		return fmt.Errorf("ublk %s: control channel closed", cmdNames[nr])
	}
	s := c.ring.nextSQE()
	if s == nil {
		return fmt.Errorf("ublk %s: control ring full", cmdNames[nr])
	}
	s.prepURingCmd(c.fd, ctrlOp(nr, c.encoded), uint64(nr))
	*(*ctrlCmd)(unsafe.Pointer(&s.cmd[0])) = cmd
	var res int32
	got := false
	for !got {
		if err := c.ring.submit(1); err != nil {
			return fmt.Errorf("ublk %s: %w", cmdNames[nr], err)
		}
		c.ring.reap(func(_ uint64, r int32) { res, got = r, true })
	}
	runtime.KeepAlive(buf)
	if res < 0 {
		dev := int(cmd.devID)
		if cmd.devID == ^uint32(0) {
			dev = -1
		}
		return &CommandError{Command: cmdNames[nr], Dev: dev, Err: unix.Errno(-res)}
	}
	return nil
}

// addDev creates a device; info is updated with what the kernel granted
// (the id, the queue count, the negotiated flags).
func (c *control) addDev(info *devInfo) error {
	return c.do(cmdAddDev, ctrlCmd{
		devID:   info.devID,
		queueID: 0xffff,
		len:     devInfoSize,
		addr:    uint64(uintptr(unsafe.Pointer(info))),
	}, unsafe.Pointer(info))
}

func (c *control) devInfo(id uint32) (devInfo, error) {
	var info devInfo
	err := c.do(cmdGetDevInfo, ctrlCmd{devID: id, queueID: 0xffff, len: devInfoSize, addr: uint64(uintptr(unsafe.Pointer(&info)))}, unsafe.Pointer(&info))
	return info, err
}

func (c *control) setParams(id uint32, p *params) error {
	return c.do(cmdSetParams, ctrlCmd{devID: id, queueID: 0xffff, len: uint16(p.len), addr: uint64(uintptr(unsafe.Pointer(p)))}, unsafe.Pointer(p))
}

func (c *control) params(id uint32) (params, error) {
	var p params
	p.len = uint32(unsafe.Sizeof(p))
	err := c.do(cmdGetParams, ctrlCmd{devID: id, queueID: 0xffff, len: uint16(p.len), addr: uint64(uintptr(unsafe.Pointer(&p)))}, unsafe.Pointer(&p))
	return p, err
}

// simple sends a command whose only argument is data[0].
func (c *control) simple(nr uint32, id uint32, data uint64) error {
	return c.do(nr, ctrlCmd{devID: id, queueID: 0xffff, data: data}, nil)
}

// Features returns the ublk feature flags (Feature*) this kernel supports,
// asked through the control node control ("" = ControlPath), or 0 with no
// error on kernels before 6.5, which cannot tell.
func Features(control string) (uint64, error) {
	c, err := openControl(control)
	if err != nil {
		return 0, err
	}
	defer c.close()
	return c.feats, nil
}

// daemonPID is what START_DEV and END_USER_RECOVERY record as the server.
func daemonPID() uint64 { return uint64(os.Getpid()) }
