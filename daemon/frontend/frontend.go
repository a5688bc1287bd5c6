// Package frontend exposes a blockdev.Device as a Linux block device. Each
// frontend is a file here that registers itself from init: nbd.go
// (/dev/nbdN through nbd.ko, served by luksd's NBD server) and ublk.go
// (/dev/ublkbN through ublk_drv). Pick resolves open's --frontend: a name,
// or auto. Adding a frontend is one more such file; nothing else changes.
//
// A frontend advertises what the device declares (blockdev.CapsOf): it
// never knows whether it serves ciphertext or plaintext, nor where the
// bytes live, and it never imports luks2.
package frontend

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// Options are what a volume asks of a frontend.
type Options struct {
	Name      string // the volume's name (NBD shows it in /sys/block/nbdN/backend)
	ReadOnly  bool
	BlockSize int    // logical block size the kernel device advertises (the volume's sector size)
	Device    string // --nbd-device /dev/nbdN, or a ublk device number wish; "" = a free one
	Recover   bool   // take over the kernel device a daemon that died left behind
	// IOTimeout fails a request the volume has not carried out in this
	// time with EIO, and the device stays (0: wait as long as it takes).
	IOTimeout time.Duration
	// Logf receives the frontend's log lines (the daemon's log).
	Logf func(format string, args ...any)
}

// Frontend exposes a blockdev.Device as a kernel block device.
type Frontend interface {
	// Name is "nbd", "ublk", ...: --frontend's word for it.
	Name() string
	// Caps says how auto finds the frontend.
	Caps() Caps
	// Available loads the kernel module if it is missing (modprobe) and
	// returns nil when the frontend is usable, or an error that says why
	// not.
	Available() error
	// Attach creates the kernel block device and starts serving dev.
	Attach(dev blockdev.Device, opts Options) (Attachment, error)
	// Release removes the kernel device that volume name's daemon left
	// behind when it died, as its state recorded it (the device path and
	// the attachment's State lines), unless a live daemon serves it: the
	// requests the kernel holds for it fail, so that a lazily unmounted
	// file system or a waiting sync can finish.
	Release(name, device string, state map[string]string) error
}

// Caps are what a frontend declares about itself.
type Caps struct {
	// Node is the device node of the frontend's kernel interface. auto
	// prefers a frontend whose Node exists (after loading Module when it
	// does not); a frontend without one is only auto's fallback.
	Node   string
	Module string
}

// Attachment is one attached kernel block device.
type Attachment interface {
	// DevicePath is /dev/nbdN or /dev/ublkbN.
	DevicePath() string
	// Wait blocks until the kernel side is gone or Detach was called.
	Wait() error
	// Detach flushes, disconnects the kernel device and releases it.
	Detach() error
	// State returns extra key/value lines for the state file (e.g.
	// "ublk-id"); Release gets them back.
	State() map[string]string
}

// Failer is an Attachment that can fail: a panic while it handled a
// request (nbd/server_panic.go, ublk/panic.go) failed that request, and
// the device refuses writes from then on. The daemon records it for
// status.
type Failer interface {
	Failed() bool
}

var (
	mu         sync.RWMutex
	registered = map[string]Frontend{}
)

// Register adds f under f.Name(). Frontends register from init.
func Register(f Frontend) {
	mu.Lock()
	defer mu.Unlock()
	registered[f.Name()] = f
}

// Lookup returns the frontend registered as name.
func Lookup(name string) (Frontend, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registered[name]
	return f, ok
}

// names returns the registered names, sorted.
func names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var ns []string
	for n := range registered {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// ErrUnavailable is matched by Pick's errors: no frontend of the name
// asked for, or none usable.
var ErrUnavailable = errors.New("no usable frontend")

// pickError is one of Pick's errors, with the frontend's own reason.
type pickError struct {
	msg   string
	cause error
}

func (e *pickError) Error() string { return e.msg }
func (e *pickError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

// Pick resolves --frontend: a registered name, or "auto" (or ""), which
// prefers a frontend whose kernel node exists (ublk's /dev/ublk-control,
// after trying to load ublk_drv) and otherwise takes the first usable one
// by name. Its errors match ErrUnavailable.
func Pick(name string) (Frontend, error) {
	if name != "" && name != "auto" {
		f, ok := Lookup(name)
		if !ok {
			return nil, &pickError{msg: fmt.Sprintf("unknown frontend %q (have: %s)", name, strings.Join(names(), ", "))}
		}
		if err := f.Available(); err != nil {
			return nil, &pickError{msg: fmt.Sprintf("frontend %s is not usable: %v", name, err), cause: err}
		}
		return f, nil
	}
	all := names()
	for _, n := range all {
		f, _ := Lookup(n)
		c := f.Caps()
		if c.Node == "" {
			continue
		}
		if _, err := os.Stat(c.Node); err != nil && c.Module != "" {
			loadModule(c.Module)
		}
		if _, err := os.Stat(c.Node); err == nil && f.Available() == nil {
			return f, nil
		}
	}
	var errs []string
	for _, n := range all {
		f, _ := Lookup(n)
		err := f.Available()
		if err == nil {
			return f, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", n, err))
	}
	if len(errs) == 0 {
		return nil, &pickError{msg: "no frontend is built in"}
	}
	return nil, &pickError{msg: fmt.Sprintf("no usable frontend (%s)", strings.Join(errs, "; "))}
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
