package nbd

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/ratelog"
)

// Config tunes a Server. Zero values mean the defaults.
type Config struct {
	// Name is the export's name. The export also answers to "" (the
	// default export), whatever its name.
	Name        string
	Description string
	// ReadOnly refuses writes even where the device would take them.
	ReadOnly bool
	// MaxRequest is the largest READ or WRITE payload accepted and the
	// maximum block size advertised (default and upper bound 32 MiB).
	MaxRequest int
	// MaxInFlightBytes bounds the payload bytes one connection may have in
	// flight (default 64 MiB); the server stops reading requests beyond it.
	MaxInFlightBytes int64
	// MaxInFlightRequests bounds the requests one connection may have in
	// flight (default 128).
	MaxInFlightRequests int
	// MaxTotalInFlightBytes bounds the payload bytes in flight over all
	// connections together (default 512 MiB).
	MaxTotalInFlightBytes int64
	// IOTimeout bounds how long the server waits for a WRITE's payload to
	// arrive and for a reply to be taken by the client (default 2 minutes),
	// so a stalled client cannot hold buffers for ever.
	IOTimeout time.Duration
	// RequestTimeout answers a request the device has not carried out in
	// this time with EIO; the device operation goes on, its result is
	// dropped (0: wait as long as the device takes). See timeout.go.
	RequestTimeout time.Duration
	// HandshakeTimeout bounds the whole option haggling, TLS handshake
	// included (default 10s).
	HandshakeTimeout time.Duration
	// TLS, with TLSMode TLSOn or TLSRequire, lets clients upgrade with
	// NBD_OPT_STARTTLS (see tls.go; LoadTLSDir reads nbdkit's files).
	TLS     *tls.Config
	TLSMode TLSMode
	// Access, when set, says which client certificates may use the
	// export and whether read-write or read-only; other clients are
	// refused (see access.go). nil lets every client in.
	Access *Access
	// MaxConns bounds simultaneous connections (default 1024); more are
	// accepted and closed at once.
	MaxConns int
	// Logf receives one line per connection and one per backend failure
	// (rate-limited); nil logs nothing.
	Logf func(format string, args ...any)
}

const (
	defaultMaxRequest   = 32 << 20
	defaultInFlight     = 64 << 20
	defaultInFlightReqs = 128
	defaultTotalFlight  = 512 << 20
	defaultIOTimeout    = 2 * time.Minute
	defaultHandshake    = 10 * time.Second
	defaultMaxConns     = 1024
	maxOptions          = 256     // options per handshake before the server hangs up
	maxOptionLen        = 8 << 10 // longest option payload read (a name is at most 4096)
)

// Server serves one blockdev.Device as one NBD export.
type Server struct {
	dev  blockdev.Device
	caps blockdev.Caps // what dev declares, read once
	// The device's optional operations, where it has them.
	trim blockdev.Trimmer
	zero blockdev.ZeroWriter // nil: write zeroes are written out
	fua  blockdev.FUAWriter  // nil: a FUA write is a write and a flush
	cfg  Config
	size atomic.Int64 // SetSize changes it (resize.go)

	// scratch writes a payload buffer without copying it (the crypt
	// layer encrypts it in place); nil: WriteAt.
	scratch blockdev.ScratchWriter

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	conns     map[net.Conn]struct{} // connections still in the handshake
	closing   bool
	wg        sync.WaitGroup
	nextID    atomic.Uint64
	budget    *semaphore    // payload bytes in flight over all connections
	reserve   int64         // of budget, for connections with nothing in flight
	ioErrors  atomic.Uint64 // requests the backend failed, for the log
	// durability logs failed flushes (FUA writes' too) apart from other
	// failures: each says acknowledged writes may be lost, so none may
	// go unlogged, but a burst of them is merged into a count.
	durability ratelog.Limiter
	panics     panicState // requests whose handling panicked (server_panic.go)
}

// NewServer returns a server for dev.
func NewServer(dev blockdev.Device, cfg Config) *Server {
	if cfg.MaxRequest <= 0 || cfg.MaxRequest > defaultMaxRequest {
		cfg.MaxRequest = defaultMaxRequest
	}
	if cfg.MaxInFlightBytes < int64(cfg.MaxRequest) {
		cfg.MaxInFlightBytes = max(defaultInFlight, int64(cfg.MaxRequest))
	}
	if cfg.MaxInFlightRequests <= 0 {
		cfg.MaxInFlightRequests = defaultInFlightReqs
	}
	if cfg.MaxTotalInFlightBytes < cfg.MaxInFlightBytes {
		cfg.MaxTotalInFlightBytes = max(defaultTotalFlight, cfg.MaxInFlightBytes)
	}
	if cfg.IOTimeout <= 0 {
		cfg.IOTimeout = defaultIOTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = defaultHandshake
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	caps, ops := blockdev.OpsOf(dev)
	if caps.ReadOnly {
		cfg.ReadOnly = true
	}
	s := &Server{
		dev:       dev,
		caps:      caps,
		zero:      ops.Zero,
		fua:       ops.FUA,
		cfg:       cfg,
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*session]struct{}{},
		conns:     map[net.Conn]struct{}{},
		budget:    newSemaphore(cfg.MaxTotalInFlightBytes),
		// No reserve when one connection may take the whole budget anyway.
		reserve: min(int64(cfg.MaxRequest), cfg.MaxTotalInFlightBytes-cfg.MaxInFlightBytes),
	}
	// A client may send TRIM unasked: a device with Trim answers it (a
	// refusal is a hint ignored), whatever it advertises.
	s.trim, _ = dev.(blockdev.Trimmer)
	s.scratch, _ = dev.(blockdev.ScratchWriter)
	s.size.Store(dev.Size())
	s.durability.Logf = cfg.Logf
	return s
}

// canTrim reports whether the device passes discards down.
func (s *Server) canTrim() bool { return !s.cfg.ReadOnly && s.caps.Trim }

// Flags returns the transmission flags the server advertises for its
// export. ServeTransmission callers pass them to the kernel.
func (s *Server) Flags() uint16 { return s.exportFlags(false) }

// exportFlags are the transmission flags for one client; readOnly when
// the access config grants it read-only use.
func (s *Server) exportFlags(readOnly bool) uint16 {
	f := uint16(FlagHasFlags | FlagSendFlush | FlagCanMultiConn)
	if s.cfg.ReadOnly || readOnly {
		return f | FlagReadOnly
	}
	f |= FlagSendFUA | FlagSendWriteZeroes
	if s.canTrim() {
		f |= FlagSendTrim
	}
	return f
}

// Size is the export's size in bytes.
func (s *Server) Size() int64 { return s.size.Load() }

// blockSizes returns the minimum, preferred and maximum block sizes: any
// byte alignment works (the crypt layer reads, modifies and writes partial
// sectors), but whole sectors are what it prefers.
func (s *Server) blockSizes() (uint32, uint32, uint32) {
	pref := uint32(4096)
	if bs := s.caps.BlockSize; bs > 0 {
		pref = uint32(max(bs, 512))
	}
	return 1, pref, uint32(s.cfg.MaxRequest)
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("nbd: server closed")

// Serve accepts connections on l and serves each on its own goroutine
// until Close. It always returns a non-nil error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if isTimeout(err) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !s.track(c) {
			c.Close()
			continue
		}
		go s.serveConn(c)
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// track registers a connection in the handshake; false when the server is
// closing or full.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || len(s.conns)+len(s.sessions) >= s.cfg.MaxConns {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

// ServeConn runs the handshake and then the transmission phase on c, and
// closes c when the client leaves or the server closes.
func (s *Server) ServeConn(c net.Conn) error {
	if !s.track(c) {
		c.Close()
		return ErrServerClosed
	}
	return s.serveConn(c)
}

func (s *Server) serveConn(c net.Conn) error {
	id := s.nextID.Add(1)
	who := describe(c, id)
	hc := &handshakeConn{conn: c, r: bufio.NewReaderSize(c, 16<<10), w: c, who: who}
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	hs, err := s.handshake(hc)
	c.SetDeadline(time.Time{})
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if err != nil {
		hc.conn.Close()
		s.wg.Done()
		if !errors.Is(err, errAborted) && !s.isClosing() {
			s.logf("nbd: %s: handshake failed: %v", who, err)
		}
		return err
	}
	flags := s.exportFlags(hs.readOnly)
	return s.runSession(hc.conn, hc.r, who, flags, hs)
}

// ServeTransmission serves c, already past the handshake (the kernel NBD
// driver's socket after NBD_CMD_CONNECT), with simple replies only. flags
// are the transmission flags the peer was told (normally Flags()). It
// returns when the peer disconnects (nil after NBD_CMD_DISC,
// ErrConnectionLost when it just closes) or the server closes (nil), and
// closes c.
func (s *Server) ServeTransmission(c net.Conn, flags uint16) error {
	if !s.track(c) {
		c.Close()
		return ErrServerClosed
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	id := s.nextID.Add(1)
	return s.runSession(c, bufio.NewReaderSize(c, 16<<10), describe(c, id), flags, handshakeResult{export: s.cfg.Name})
}

// runSession serves a connection in the transmission phase. After a
// disconnect request, or when the server closes, it returns once every
// request in flight is answered. When the connection is lost or broken,
// the answers can no longer be delivered: it returns at once and the
// requests finish in the background, so that a caller (an Attachment) can
// replace the connection while a stalled device still holds them.
func (s *Server) runSession(c net.Conn, br *bufio.Reader, who string, flags uint16, hs handshakeResult) error {
	ss := s.newSession(br, replyWriter(c), flags, hs.structured)
	ss.allocation = hs.allocation
	ss.conn = c
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
		return ErrServerClosed
	}
	s.sessions[ss] = struct{}{}
	grow := len(s.sessions) <= maxGrownSendBuffers
	s.mu.Unlock()
	if grow {
		growSendBuffer(rawConn(c))
	}
	err := ss.read()
	reason := "client disconnected"
	switch {
	case s.isClosing() && (err == nil || isTimeout(err)):
		reason = "server shut down"
		err = nil
	case errors.Is(err, ErrConnectionLost):
		reason = "client went away without a disconnect request"
	case err != nil:
		reason = err.Error()
	}
	end := func() {
		ss.wg.Wait()
		c.Close()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		s.logf("nbd: %s: export %q, %d requests, %s", who, hs.export, ss.requests.Load(), reason)
		s.wg.Done()
	}
	if err == nil {
		end()
		return nil
	}
	c.Close()
	go end()
	return err
}

// Close stops the listeners, ends every connection once its in-flight
// requests are answered, and waits for them. The device stays open.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	for ss := range s.sessions {
		ss.stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.durability.Flush() // the flush failures not logged yet, counted
	return nil
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

func describe(c net.Conn, id uint64) string {
	a := c.RemoteAddr()
	if a == nil || a.String() == "" || a.String() == "@" {
		return fmt.Sprintf("connection %d (%s)", id, networkOf(c))
	}
	return fmt.Sprintf("connection %d (%s %s)", id, a.Network(), a)
}

func networkOf(c net.Conn) string {
	if a := c.LocalAddr(); a != nil {
		return a.Network()
	}
	return "socket"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errAborted ends a handshake the client gave up on (NBD_OPT_ABORT).
var errAborted = errors.New("client aborted the handshake")
