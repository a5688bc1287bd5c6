package frontend

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/ublk"
)

// ublkFrontend exposes a volume as /dev/ublkbN through the kernel's ublk
// driver (Linux 6.0+, ublk_drv), whose control node is control.
type ublkFrontend struct{ control string }

func init() { Register(ublkFrontend{control: ublk.ControlPath}) }

func (ublkFrontend) Name() string { return "ublk" }

// Caps: auto prefers ublk where its control node exists.
func (f ublkFrontend) Caps() Caps { return Caps{Node: f.control, Module: "ublk_drv"} }

// Available loads ublk_drv when its control node is missing and checks
// that the kernel answers on it.
func (f ublkFrontend) Available() error {
	if _, err := os.Stat(f.control); err != nil {
		merr := modprobe("ublk_drv")
		if _, err := os.Stat(f.control); err != nil {
			why := "this kernel has no ublk (Linux 6.0 or later with CONFIG_BLK_DEV_UBLK)"
			if merr != nil {
				why += "; " + merr.Error()
			}
			return fmt.Errorf("%s is missing: %s", f.control, why)
		}
	}
	if _, err := ublk.Features(f.control); err != nil {
		return err
	}
	return nil
}

// ublkStateKey is the state file line that records the device number, so
// that `luksd open --recover NAME` can take the device over.
const ublkStateKey = "ublk-id"

// Attach creates and starts a ublk device for dev, or with opts.Recover
// takes over the device opts.Device names (left by a daemon that died).
// Discards are served when dev declares trim (the crypt layer does when
// they are allowed).
func (f ublkFrontend) Attach(dev blockdev.Device, opts Options) (Attachment, error) {
	id := -1
	if opts.Device != "" {
		n, err := parseUblkID(opts.Device)
		if err != nil {
			return nil, err
		}
		id = n
	}
	uo := ublk.Options{
		ID:            id,
		ReadOnly:      opts.ReadOnly,
		AllowDiscards: true,
		BlockSize:     opts.BlockSize,
		// ublk_drv waits for a live daemon however long a request takes;
		// --io-timeout is the daemon's to enforce.
		RequestTimeout: opts.IOTimeout,
		Logf:           opts.Logf,
		Control:        f.control,
	}
	if opts.Recover {
		if id < 0 {
			return nil, errors.New("ublk recovery needs the device number of the dead daemon's device")
		}
		d, err := ublk.Recover(id, dev, uo)
		if err != nil {
			return nil, err
		}
		return &ublkAttachment{d: d}, nil
	}
	d, err := ublk.New(dev, uo)
	if err != nil {
		return nil, err
	}
	if err := d.Start(); err != nil {
		return nil, err
	}
	return &ublkAttachment{d: d}, nil
}

// parseUblkID accepts "N", "ublkbN" or "/dev/ublkbN" (and the ublkcN forms).
func parseUblkID(s string) (int, error) {
	t := strings.TrimPrefix(s, "/dev/")
	t = strings.TrimPrefix(t, "ublkb")
	t = strings.TrimPrefix(t, "ublkc")
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n >= 1<<20 {
		return 0, fmt.Errorf("%q is not a ublk device (want N, ublkbN or /dev/ublkbN)", s)
	}
	return n, nil
}

type ublkAttachment struct{ d *ublk.Device }

func (a *ublkAttachment) DevicePath() string { return a.d.Path() }
func (a *ublkAttachment) Wait() error        { return a.d.Wait() }
func (a *ublkAttachment) Detach() error      { return a.d.Stop() }
func (a *ublkAttachment) Failed() bool       { return a.d.Failed() }

func (a *ublkAttachment) State() map[string]string {
	return map[string]string{ublkStateKey: strconv.Itoa(a.d.ID())}
}

// Release removes the ublk device a dead daemon left behind, as recorded
// in its state (device path and the "ublk-id" line), unless a running
// daemon serves it. The kernel holds a dead daemon's I/O for recovery;
// deleting the device fails it, so a lazy unmount or a waiting sync can
// finish. It asks through ublk.ControlPath.
func (ublkFrontend) Release(_, device string, extra map[string]string) error {
	idText := extra[ublkStateKey]
	if idText == "" {
		idText = device
	}
	id, err := parseUblkID(idText)
	if err != nil {
		return err
	}
	return ublk.DeleteAbandoned(id)
}
