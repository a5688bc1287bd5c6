package daemon

import (
	"sync/atomic"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon/frontend"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/nbd"
)

// An export (serve --name NAME, or serve-PID) runs as open's volumes run:
// its state and control socket under RunDir()/NAME, so that status,
// close, resize, luksSuspend, luksResume and online reencryption find it
// by that name. Its
// "frontend" is the NBD export itself (exportFrontend) and it has no
// /dev/mapper name. It stays in the foreground and logs to standard
// error, as an unnamed serve.

// exportFrontendName is an export's frontend in its state file.
const exportFrontendName = "serve"

// serveNamed runs spec's volume as the NBD export opts describe, under
// spec.Name, until it is closed.
func serveNamed(spec Spec, key *keyring.Secret, opts ServeOptions) error {
	defer key.Wipe()
	setServeMemoryLimit()
	fe := &exportFrontend{opts: opts}
	return runDaemon(daemonConfig{
		Frontend: fe,
		Attach:   frontend.Options{Name: spec.Name, ReadOnly: spec.Options.ReadOnly, BlockSize: spec.blockSize()},
		State:    spec.state(),
		Open:     spec.opener(key),
		Mapping:  mappingNone,
		Ready:    func(where string) { logServing(spec, fe.dev, where, opts) },
		// Foreground: the command prints an error before it is serving.
		CallerReports: true,
	})
}

// exportFrontend serves a volume on the listener ServeOptions name. It is
// not registered: open cannot pick it.
type exportFrontend struct {
	opts ServeOptions
	dev  blockdev.Device // what Attach serves
}

func (f *exportFrontend) Name() string                                    { return exportFrontendName }
func (f *exportFrontend) Caps() frontend.Caps                             { return frontend.Caps{} }
func (f *exportFrontend) Available() error                                { return nil }
func (f *exportFrontend) Release(string, string, map[string]string) error { return nil }

// Attach listens and serves dev there.
func (f *exportFrontend) Attach(dev blockdev.Device, o frontend.Options) (frontend.Attachment, error) {
	l, where, err := listen(f.opts)
	if err != nil {
		return nil, errorf(ErrBusy, "Cannot listen: %v.", err)
	}
	f.dev = dev
	a := &exportAttachment{
		srv:   newExportServer(dev, f.opts, o.ReadOnly, o.Logf),
		where: where,
		done:  make(chan struct{}),
	}
	go func() {
		err := a.srv.Serve(l)
		if !a.detached.Load() {
			a.err = err
		}
		close(a.done)
	}()
	return a, nil
}

// exportAttachment is a running export.
type exportAttachment struct {
	srv      *nbd.Server
	where    string // "unix socket PATH" or nbd://HOST:PORT/
	done     chan struct{}
	err      error // why Serve stopped, when not detached
	detached atomic.Bool
}

func (a *exportAttachment) DevicePath() string       { return a.where }
func (a *exportAttachment) State() map[string]string { return nil }
func (a *exportAttachment) Failed() bool             { return a.srv.Failed() }

func (a *exportAttachment) Wait() error {
	<-a.done
	return a.err
}

// Detach ends every connection once its requests are answered.
func (a *exportAttachment) Detach() error {
	a.detached.Store(true)
	a.srv.Close()
	<-a.done
	return nil
}

// Resize serves the new size: clients that connect from now on are told
// it; one already connected keeps the size it was told (NBD cannot tell
// it another), and requests past the new end fail.
func (a *exportAttachment) Resize(old, size int64) error {
	a.srv.SetSize(size)
	return nil
}
