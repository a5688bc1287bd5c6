package daemon

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/nbd"
)

// ServeOptions say where Serve listens.
type ServeOptions struct {
	Socket     string // a unix socket (mode 0600); else TCP on Listen
	Listen     string // HOST:PORT; "" = 127.0.0.1 and NBD's port
	ExportName string
}

// serveMemoryLimit is the soft heap limit of Serve.
const serveMemoryLimit = 80 << 20

// Serve opens spec's volume with key (which it wipes once the crypt layer
// has its own copy) and serves its plaintext as an NBD export, in the
// foreground, until SIGINT or SIGTERM; then it flushes. It logs to
// standard error. A listener it cannot open is ErrBusy.
func Serve(spec Spec, key *keyring.Secret, opts ServeOptions) error {
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

	// The data path recycles its payload buffers; a soft heap limit keeps
	// the little garbage it makes from doubling the heap between
	// collections (GOMEMLIMIT overrides it).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
	ro := spec.Options.ReadOnly
	logger := log.New(os.Stderr, "luksd: ", log.LstdFlags)
	srv := nbd.NewServer(dev, nbd.Config{Name: opts.ExportName, ReadOnly: ro, Logf: logger.Printf})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	mode := "read-write"
	if ro {
		mode = "read-only"
	}
	path := spec.Location
	logger.Printf("serving %s (%d bytes, %s, %d-byte sectors, %s) on %s", path, dev.Size(), spec.Segment.Cipher, dev.BlockSize(), mode, where)

	select {
	case sig := <-sigs:
		logger.Printf("%v: stopping", sig)
		srv.Close()
		<-served
	case err := <-served:
		srv.Close()
		dev.Flush()
		return fmt.Errorf("serving: %w", err)
	}
	if err := dev.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", path, err)
	}
	logger.Printf("flushed %s, exiting", path)
	return nil
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
