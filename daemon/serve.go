package daemon

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/nbd"
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
// foreground, until SIGINT or SIGTERM; then it flushes. It logs to
// standard error. A listener it cannot open is ErrBusy.
func Serve(spec Spec, key *keyring.Secret, opts ServeOptions) error {
	if opts.tlsConfig == nil {
		if err := opts.Prepare(); err != nil {
			key.Wipe()
			return err
		}
	}
	if opts.Name != "" {
		spec.Name = opts.Name
		return serveNamed(spec, key, opts)
	}
	dev, _, _, err := openCrypt(spec, key)
	key.Wipe()
	if err != nil {
		return err
	}
	defer dev.Close()
	sc, err := startServeControl(spec, dev)
	if err != nil {
		Log.Printf("no control socket (no online reencryption): %s", oneLine(err))
	}
	defer sc.stop()

	// From here on a signal stops the server cleanly (socket removed).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	l, where, err := listen(opts)
	if err != nil {
		return errorf(ErrBusy, "Cannot listen: %v.", err)
	}
	sc.setExport(where)

	// The data path recycles its payload buffers; a soft heap limit keeps
	// the little garbage it makes from doubling the heap between
	// collections (GOMEMLIMIT overrides it).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
	ro := spec.Options.ReadOnly
	logger := log.New(os.Stderr, "luksd: ", log.LstdFlags)
	srv := newExportServer(dev, opts, ro, logger.Printf)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	mode := "read-write"
	if ro {
		mode = "read-only"
	}
	path := spec.Location
	logger.Printf("serving %s (%d bytes, %s, %d-byte sectors, %s) on %s%s", path, dev.Size(), spec.Segment.Cipher, dev.BlockSize(), mode, where, opts.TLS.describe())

	var closer net.Conn
	select {
	case sig := <-sigs:
		logger.Printf("%v: stopping", sig)
		srv.Close()
		<-served
	case closer = <-sc.closeRequests():
		logger.Printf("close requested: stopping")
		srv.Close()
		<-served
		defer func() { fmt.Fprintln(closer, ctlOK); closer.Close() }()
	case err := <-served:
		srv.Close()
		sc.stop()
		dev.Flush()
		return fmt.Errorf("serving: %w", err)
	}
	sc.stop() // an online job pauses before the last flush
	if err := dev.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", path, err)
	}
	logger.Printf("flushed %s, exiting", path)
	return nil
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
