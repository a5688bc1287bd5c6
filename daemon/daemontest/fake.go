// Package daemontest holds test doubles for the daemon: a frontend that
// attaches no kernel device, so that the daemon's whole life (state,
// control socket, signals, close) runs on a machine without nbd.ko or
// ublk_drv and the test can reach the device the daemon serves.
package daemontest

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon/frontend"
)

// Fake is a frontend named "fake" whose attachments wait until detached,
// or until the test makes the kernel side vanish.
type Fake struct {
	mu   sync.Mutex
	last *Attachment
	// AttachErr, when set, is what Attach fails with.
	AttachErr error
}

var _ frontend.Frontend = (*Fake)(nil)

func (f *Fake) Name() string                                    { return "fake" }
func (f *Fake) Caps() frontend.Caps                             { return frontend.Caps{} }
func (f *Fake) Available() error                                { return nil }
func (f *Fake) Release(string, string, map[string]string) error { return nil }

// Attach records dev and opts in a new Attachment.
func (f *Fake) Attach(dev blockdev.Device, opts frontend.Options) (frontend.Attachment, error) {
	if f.AttachErr != nil {
		return nil, f.AttachErr
	}
	a := &Attachment{Dev: dev, Opts: opts, gone: make(chan struct{})}
	f.mu.Lock()
	f.last = a
	f.mu.Unlock()
	return a, nil
}

// Last returns the latest attachment.
func (f *Fake) Last() *Attachment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Attachment is a Fake's attachment: Dev is what the daemon serves.
type Attachment struct {
	Dev  blockdev.Device
	Opts frontend.Options
	// AsKernel makes Detach's flush fail the way the kernel reports it:
	// a bare EIO, whatever the device's error was (NBD's sync).
	AsKernel atomic.Bool

	gone      chan struct{}
	once      sync.Once
	mu        sync.Mutex
	detached  int
	sizes     []int64 // what Resize was told (resize.go)
	resizeErr error   // what Resize fails with
	discards  []bool  // what SetDiscards was told (discards.go)
	failed    atomic.Bool
}

func (a *Attachment) DevicePath() string { return "/nonexistent/fake-" + a.Opts.Name }
func (a *Attachment) Wait() error        { <-a.gone; return nil }
func (a *Attachment) State() map[string]string {
	return map[string]string{"fake-id": "7"}
}

// Vanish makes the kernel side go away by itself, as nbd-client -d does.
func (a *Attachment) Vanish() { a.once.Do(func() { close(a.gone) }) }

// Detach counts the call, vanishes and flushes Dev.
func (a *Attachment) Detach() error {
	a.mu.Lock()
	a.detached++
	a.mu.Unlock()
	a.Vanish()
	err := a.Dev.Flush()
	if err != nil && a.AsKernel.Load() {
		return syscall.EIO
	}
	return err
}

// Detaches returns how many times Detach was called.
func (a *Attachment) Detaches() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.detached
}
