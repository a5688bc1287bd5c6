package daemon

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/nbd"
	"golang.org/x/sys/unix"
)

// ServeOptions say where Serve listens.
type ServeOptions struct {
	Name       string // when set, the export is a volume by that name (serve_named.go)
	Socket     string // a unix socket (mode 0600); else TCP on Listen
	Listen     string // HOST:PORT; "" = 127.0.0.1 and NBD's port
	ExportName string
	TLS        TLSOptions

	tlsConfig *tls.Config // loaded by Prepare
	access    *nbd.Access // loaded by Prepare
}

// TLSOptions are nbdkit's TLS settings: --tls, --tls-certificates and
// --tls-verify-peer.
type TLSOptions struct {
	Mode       nbd.TLSMode
	CertDir    string // ca-cert.pem, server-cert.pem, server-key.pem
	VerifyPeer bool   // require a client certificate signed by ca-cert.pem
	AccessFile string // per-export access by client certificate (nbd.Access)
}

// Prepare checks opts and loads the TLS certificates, so that a caller
// can report a bad directory before it asks for a passphrase. Serve
// calls it when the caller has not.
func (opts *ServeOptions) Prepare() error {
	t := opts.TLS
	switch {
	case t.Mode == nbd.TLSOff && (t.CertDir != "" || t.VerifyPeer || t.AccessFile != ""):
		return errorf(ErrInvalid, "Options --tls-certificates, --tls-verify-peer and --tls-access need --tls=on or --tls=require.")
	case t.Mode == nbd.TLSOff:
		return nil
	case t.CertDir == "":
		return errorf(ErrInvalid, "Option --tls=%s needs --tls-certificates DIR.", t.Mode)
	case t.AccessFile != "" && !t.VerifyPeer:
		return errorf(ErrInvalid, "Option --tls-access needs --tls-verify-peer (it matches client certificates).")
	}
	if t.AccessFile != "" {
		a, err := nbd.LoadAccessFile(t.AccessFile)
		if err != nil {
			return &Error{Kind: ErrInvalid, Msg: err.Error() + ".", Err: err}
		}
		opts.access = a
	}
	cfg, err := nbd.LoadTLSDir(t.CertDir, t.VerifyPeer)
	if err != nil {
		return &Error{Kind: ErrInvalid, Msg: err.Error() + ".", Err: err}
	}
	opts.tlsConfig = cfg
	return nil
}

// serveMemoryLimit is the soft heap limit of Serve.
const serveMemoryLimit = 80 << 20

// Serve opens spec's volume with key (which it wipes once the crypt layer
// has its own copy) and serves its plaintext as an NBD export, in the
// foreground, until SIGINT, SIGTERM or a close; then it flushes. It logs
// to standard error. A listener it cannot open is ErrBusy.
//
// Every export is a volume with a name, a state file and a control socket
// (serve_named.go): --name, or serve-PID. So luksd finds it by its image
// (status, the in-use checks) and hands it online jobs (`luksd reencrypt
// IMAGE`). Only where the run directory cannot be written does an unnamed
// export run without them (serveUnnamed).
func Serve(spec Spec, key *keyring.Secret, opts ServeOptions) error {
	serveProcs(spec) // procs.go
	if opts.tlsConfig == nil {
		if err := opts.Prepare(); err != nil {
			key.Wipe()
			return err
		}
	}
	if opts.Name == "" {
		if err := runDirWritable(); err != nil {
			Log.Printf("no name, state or control socket (%s): status, close and online reencryption cannot reach this export", oneLine(err))
			return serveUnnamed(spec, key, opts)
		}
		opts.Name = fmt.Sprintf("serve-%d", os.Getpid())
	}
	spec.Name = opts.Name
	return serveNamed(spec, key, opts)
}

// runDirWritable says why a volume's state cannot be kept under RunDir.
func runDirWritable() error {
	if err := os.MkdirAll(RunDir(), 0o755); err != nil {
		return err
	}
	if err := unix.Access(RunDir(), unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("%s: %w", RunDir(), err)
	}
	return nil
}

// serveUnnamed serves spec's volume with no state and no control socket,
// until SIGINT or SIGTERM.
func serveUnnamed(spec Spec, key *keyring.Secret, opts ServeOptions) error {
	dev, _, _, err := openCrypt(spec, key)
	key.Wipe()
	if err != nil {
		return err
	}
	defer dev.Close()

	// From here on a signal stops the server cleanly (socket removed).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	l, where, err := listen(opts)
	if err != nil {
		return errorf(ErrBusy, "Cannot listen: %v.", err)
	}
	setServeMemoryLimit()
	srv := newExportServer(dev, opts, spec.Options.ReadOnly, Log.Printf)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	logServing(spec, dev, where, opts)

	select {
	case sig := <-sigs:
		Log.Printf("%v: stopping", sig)
		srv.Close()
		<-served
	case err := <-served:
		srv.Close()
		if ferr := dev.Flush(); ferr != nil {
			// Acknowledged writes may not be durable: say so, the
			// serving error is what the caller reports.
			Log.Printf("flushing %s: %s", spec.Location, oneLine(ferr))
		}
		return fmt.Errorf("serving: %w", err)
	}
	if err := dev.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", spec.Location, err)
	}
	Log.Printf("flushed %s, exiting", spec.Location)
	return nil
}

// setServeMemoryLimit sets a soft heap limit unless GOMEMLIMIT does: the
// data path recycles its payload buffers, and the limit keeps the little
// garbage it makes from doubling the heap between collections.
func setServeMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
}

// logServing says what an export serves, and where. The export is
// read-only as the server makes it: when asked, or when the device is
// (a read-only backend, such as an NBD export its server serves so).
func logServing(spec Spec, dev blockdev.Device, where string, opts ServeOptions) {
	mode := "read-write"
	if spec.Options.ReadOnly || blockdev.CapsOf(dev).ReadOnly {
		mode = "read-only"
	}
	prefix := ""
	if spec.Name != "" {
		prefix = spec.Name + ": "
	}
	Log.Printf("%sserving %s (%d bytes, %s, %d-byte sectors, %s) on %s%s", prefix, spec.Location, dev.Size(),
		spec.Segment.Cipher, spec.blockSize(), mode, where, opts.TLS.describe())
}

// newExportServer is the NBD server of dev that opts describe.
func newExportServer(dev blockdev.Device, opts ServeOptions, readOnly bool, logf func(string, ...any)) *nbd.Server {
	return nbd.NewServer(dev, nbd.Config{Name: opts.ExportName, ReadOnly: readOnly, Logf: logf,
		TLS: opts.tlsConfig, TLSMode: opts.TLS.Mode, Access: opts.access})
}

// listen opens the unix socket or the TCP listener opts name, and says
// where it listens.
func listen(opts ServeOptions) (net.Listener, string, error) {
	if opts.Socket != "" {
		l, err := nbd.ListenUnix(opts.Socket, 0o600)
		return l, "unix socket " + opts.Socket, err
	}
	addr := opts.Listen
	if addr == "" {
		addr = "127.0.0.1:" + nbd.DefaultPort
	}
	l, err := nbd.ListenTCP(addr)
	if err != nil {
		return nil, "", err
	}
	return l, "nbd://" + l.Addr().String() + "/", nil
}

// describe says how the server treats TLS, for the log.
func (t TLSOptions) describe() string {
	switch {
	case t.Mode == nbd.TLSOff:
		return ""
	case t.AccessFile != "":
		return fmt.Sprintf(", TLS %s, client certificates verified against %s, access by %s", t.Mode, t.CertDir, t.AccessFile)
	case t.VerifyPeer:
		return fmt.Sprintf(", TLS %s, client certificates verified against %s", t.Mode, t.CertDir)
	}
	return fmt.Sprintf(", TLS %s, no client certificates", t.Mode)
}
