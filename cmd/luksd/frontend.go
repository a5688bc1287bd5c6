package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// attachOptions are what `luksd open` asks of a frontend.
type attachOptions struct {
	Name          string // the mapping's NAME (state under /run/luksd/NAME)
	ReadOnly      bool
	AllowDiscards bool
	BlockSize     int    // logical block size the kernel device advertises (the volume's sector size)
	Device        string // --nbd-device /dev/nbdN, or a ublk device id wish; "" = pick a free one
	Recover       bool   // re-attach to a kernel device left by a daemon that died (ublk user recovery)
	// IOTimeout fails a request the volume has not carried out in this
	// time with EIO, and the device stays (0: wait as long as it takes).
	IOTimeout time.Duration
}

// frontend exposes a blockdev.Device as a kernel block device.
type frontend interface {
	// Name is "nbd" or "ublk".
	Name() string
	// Available loads the kernel module if it is missing (modprobe) and
	// returns nil when the frontend is usable, or an error that says why not.
	Available() error
	// Attach creates the kernel block device and starts serving dev.
	Attach(dev blockdev.Device, opts attachOptions) (attachment, error)
}

// attachment is one attached kernel block device.
type attachment interface {
	// DevicePath is /dev/nbdN or /dev/ublkbN.
	DevicePath() string
	// Wait blocks until the kernel side is gone or Detach was called.
	Wait() error
	// Detach flushes, disconnects the kernel device and releases it.
	Detach() error
	// State returns extra key/value lines for the state file (e.g. "ublk-id").
	State() map[string]string
}

// frontends holds the registered frontends by name; frontend_nbd.go
// registers "nbd", frontend_ublk.go registers "ublk" (each from init).
var frontends = map[string]frontend{}

// registerFrontend adds f under f.Name().
func registerFrontend(f frontend) { frontends[f.Name()] = f }

// ublkControl is the control node ublk_drv creates.
var ublkControl = "/dev/ublk-control"

// pickFrontend resolves --frontend: "nbd", "ublk", or "auto", which prefers
// ublk when /dev/ublk-control exists (after trying to load ublk_drv), else nbd.
func pickFrontend(name string) (frontend, error) {
	if name == "" {
		name = "auto"
	}
	if name != "auto" {
		f, ok := frontends[name]
		if !ok {
			return nil, fmt.Errorf("unknown frontend %q (have: %s)", name, frontendNames())
		}
		if err := f.Available(); err != nil {
			return nil, fmt.Errorf("frontend %s is not usable: %w", name, err)
		}
		return f, nil
	}
	if f, ok := frontends["ublk"]; ok {
		if _, err := os.Stat(ublkControl); err != nil {
			loadModule("ublk_drv")
		}
		if _, err := os.Stat(ublkControl); err == nil && f.Available() == nil {
			return f, nil
		}
	}
	var errs []string
	for _, n := range []string{"nbd", "ublk"} {
		f, ok := frontends[n]
		if !ok {
			continue
		}
		err := f.Available()
		if err == nil {
			return f, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", n, err))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("no frontend is built in")
	}
	return nil, fmt.Errorf("no usable frontend (%s)", strings.Join(errs, "; "))
}

func frontendNames() string {
	var names []string
	for n := range frontends {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// loadModule is modprobe; tests replace it.
var loadModule = modprobe

// modprobe loads a kernel module, ignoring failure: the caller checks
// whether the device node it needs appeared.
func modprobe(module string) error {
	out, err := exec.Command("modprobe", module).CombinedOutput()
	if err != nil {
		return fmt.Errorf("modprobe %s: %v: %s", module, err, strings.TrimSpace(string(out)))
	}
	return nil
}
