package nbd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/ratelog"
)

// Client is a blockdev.Device backed by an export of a remote NBD server
// (nbdkit, qemu-nbd, nbd-server, luksd serve): the nbd://, nbds://,
// nbd+unix:// and nbds+unix:// locations.
//
// It speaks fixed newstyle with structured replies, keeps many requests
// in flight on each connection, and opens several connections (round
// robin) when the server offers NBD_FLAG_CAN_MULTI_CONN. Requests are
// split at the server's maximum block size and aligned to its minimum.
//
// A dropped connection is redialled with exponential backoff and jitter.
// Reads and writes that were in flight on it are sent again (a write that
// was not acknowledged may or may not have landed; writing it again is
// what the kernel's nbd driver does too). Writes that were acknowledged
// since the last successful flush may have been lost with the server's
// cache: the next Flush fails with EIO. A server that stays away for
// ClientOptions.GiveUp (a minute by default, counted once for all
// connections from when the first found it gone) fails requests with EIO, and
// from then on the client dials again at most every 2 s (requests in
// between fail at once) until the server is back; a
// connection on which requests wait and no reply comes for IOTimeout is
// dropped (and redialled) too. A server that breaks the protocol (a reply
// that is no reply, or answers no request, or does not fit it) is not a
// dropped connection: the requests in flight fail at once with EIO, a
// line is logged (ClientOptions.Logf, if set), the connection is
// dropped, and later requests dial a new one.
type Client struct {
	target Target
	tls    *tls.Config
	opts   ClientOptions
	info   exportInfo
	slots  []*clientSlot
	next   atomic.Uint32
	closed atomic.Bool
	// lost: a connection dropped with acknowledged writes no flush had
	// covered; the next Flush reports it.
	lost  atomic.Bool
	rmwMu sync.Mutex // unaligned writes read-modify-write one at a time
	down  serverDown
	// violations logs protocol violations and lost connections: a
	// server that breaks the protocol, or drops every connection, must
	// not flood the log.
	violations ratelog.Limiter
}

// ClientOptions tune a Client; the zero value is the default.
type ClientOptions struct {
	ReadOnly bool // refuse writes even when the export takes them
	// Connections is how many connections to open when the server
	// offers multi-conn (default: one per core, 2 to 4); without it the
	// client opens one.
	Connections int
	// GiveUp is how long a request waits for a server that is away
	// before it fails with EIO (default one minute).
	GiveUp time.Duration
	// IOTimeout is how long a reply may take before the connection is
	// considered dead and redialled (default 30 s).
	IOTimeout time.Duration
	// Logf receives a line for each server that broke the protocol, and
	// for each connection lost and redialled (rate-limited, with a count
	// of the lines suppressed); nil logs nothing (the failed requests'
	// errors say it too).
	Logf func(format string, args ...any)
}

const (
	defaultGiveUp   = time.Minute
	clientIOTimeout = 30 * time.Second
	redialFirstWait = 20 * time.Millisecond
	redialMaxWait   = 2 * time.Second
)

func init() {
	for _, scheme := range []string{"nbd", "nbds", "nbd+unix", "nbds+unix"} {
		blockdev.Register(scheme, func(location string, opts blockdev.OpenOptions) (blockdev.Device, error) {
			// A remote export cannot be claimed from here: Exclusive is
			// the server's business (nbdkit serves one client unless
			// told otherwise).
			return Dial(location, ClientOptions{ReadOnly: opts.ReadOnly, Logf: opts.Logf})
		})
	}
}

// defaultConnections is how many connections a client opens to a server
// that offers multi-conn: one per core, from 2 to 4. Each has a goroutine
// reading its replies; more connections than cores spread the replies
// thinner (fewer per system call and per wakeup) and add no parallelism:
// on 2 cores, 4 KiB random reads over 4 connections to nbdkit cost the
// client 40% more CPU than over 2.
func defaultConnections() int { return min(4, max(2, runtime.GOMAXPROCS(0))) }

// Dial connects to the export an NBD URI names.
func Dial(uri string, opts ClientOptions) (*Client, error) {
	t, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	if opts.Connections <= 0 {
		opts.Connections = defaultConnections()
	}
	if opts.GiveUp <= 0 {
		opts.GiveUp = defaultGiveUp
	}
	if opts.IOTimeout <= 0 {
		opts.IOTimeout = clientIOTimeout
	}
	c := &Client{target: t, opts: opts}
	c.violations.Logf = opts.Logf
	if t.TLS {
		if c.tls, err = t.clientTLS(); err != nil {
			return nil, err
		}
	}
	first, err := c.connect()
	if err != nil {
		return nil, fmt.Errorf("NBD %s: %w", uri, err)
	}
	c.info = first.info
	if c.info.size > math.MaxInt64 {
		first.close()
		return nil, fmt.Errorf("NBD %s: export of %d bytes is too large", uri, c.info.size)
	}
	n := 1
	if c.info.flags&FlagCanMultiConn != 0 {
		n = opts.Connections
	}
	c.slots = make([]*clientSlot, n)
	for i := range c.slots {
		c.slots[i] = &clientSlot{}
	}
	c.slots[0].conn = first
	return c, nil
}

// connect dials the server and runs the handshake, within IOTimeout.
func (c *Client) connect() (*clientConn, error) {
	d := net.Dialer{Timeout: c.opts.IOTimeout}
	nc, err := d.Dial(c.target.Network, c.target.Addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(c.opts.IOTimeout))
	conn, r, info, err := clientHandshake(nc, c.target.Export, c.tls)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if c.info.size != 0 || c.info.flags != 0 { // a reconnection: the same export?
		if info.size != c.info.size || info.flags&FlagReadOnly != c.info.flags&FlagReadOnly {
			conn.Close()
			return nil, protocolError("the export changed (size %d, flags %#x) after a reconnection", info.size, info.flags)
		}
	}
	return newClientConn(conn, r, info, c.opts.IOTimeout, c.violated), nil
}

// violated logs a connection that ended because the server broke the
// protocol.
func (c *Client) violated(err error, inFlight int) {
	c.violations.Printf("nbd: server %s: %v: dropped the connection, %d request(s) in flight failed with EIO",
		c.target.Addr, err, inFlight)
}

// clientSlot holds one of the client's connections, redialled when lost.
type clientSlot struct {
	mu        sync.Mutex
	conn      *clientConn // nil before the first dial
	redialled bool        // conn was lost and is being replaced (logged when it is)
}

// serverDown is when the server went away, shared by the client's
// connections: the first to find it gone starts GiveUp for all of them,
// so that with several connections requests fail after one GiveUp, not
// one per connection, and a dial that succeeds on any of them ends it.
type serverDown struct {
	mu      sync.Mutex
	since   time.Time // when a connection found the server gone; zero while it is there
	lastTry time.Time // the last dial, by any connection
	lastErr error
}

// serverGone notes that a connection needs a dial (its connection was
// lost, or it has none yet) and reports whether to fail at once instead:
// GiveUp has passed since the server went away and a connection dialled
// a moment ago, so requests do not queue behind a dial each.
func (c *Client) serverGone() (failNow bool) {
	d := &c.down
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.since.IsZero() {
		d.since = time.Now()
		return false
	}
	return time.Since(d.since) > c.opts.GiveUp && time.Since(d.lastTry) < redialMaxWait
}

// dialing notes a dial.
func (c *Client) dialing() {
	c.down.mu.Lock()
	c.down.lastTry = time.Now()
	c.down.mu.Unlock()
}

// dialFailed notes a failed dial and reports whether GiveUp has passed
// since the server went away.
func (c *Client) dialFailed(err error) (givenUp bool) {
	d := &c.down
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastErr = err
	if d.since.IsZero() { // back for another connection meanwhile, and gone again
		d.since = time.Now()
	}
	return time.Since(d.since) > c.opts.GiveUp
}

// serverBack notes a successful dial.
func (c *Client) serverBack() {
	c.down.mu.Lock()
	c.down.since, c.down.lastErr = time.Time{}, nil
	c.down.mu.Unlock()
}

// conn returns slot i's live connection, redialling it if it was lost.
func (c *Client) conn(i int) (*clientConn, error) {
	s := c.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.reap(s) {
		return s.conn, nil
	}
	if c.serverGone() {
		// Given up, and tried a moment ago: fail at once rather than
		// queue every request behind a dial.
		return nil, c.unreachable()
	}
	wait := redialFirstWait
	for {
		if c.closed.Load() {
			return nil, net.ErrClosed
		}
		c.dialing()
		cc, err := c.connect()
		if err == nil {
			s.conn = cc
			c.serverBack()
			if s.redialled {
				c.violations.Printf("nbd: server %s: reconnected", c.target.Addr)
				s.redialled = false
			}
			return cc, nil
		}
		if errors.Is(err, errServerProtocol) {
			c.dialFailed(err)
			c.violations.Printf("nbd: server %s: %v (in the handshake): requests fail with EIO", c.target.Addr, err)
			return nil, c.unreachable()
		}
		if c.dialFailed(err) {
			return nil, c.unreachable()
		}
		time.Sleep(wait/2 + rand.N(wait)) // jitter: connections do not redial in step
		wait = min(2*wait, redialMaxWait)
	}
}

// reap drops s's connection if it is dead, noting acknowledged writes
// it may have lost, and reports whether s has a live one. s.mu is held.
func (c *Client) reap(s *clientSlot) bool {
	if s.conn == nil {
		return false
	}
	select {
	case <-s.conn.dead:
		if s.conn.acked.Load() > s.conn.flushed.Load() {
			c.lost.Store(true)
		}
		s.conn.mu.Lock()
		cause := s.conn.err
		s.conn.mu.Unlock()
		c.violations.Printf("nbd: server %s: connection lost (%v), redialling", c.target.Addr, cause)
		s.conn = nil
		s.redialled = true
		return false
	default:
		return true
	}
}

// unreachable is the EIO a request fails with when the server stays
// away: since when a connection first found it gone.
func (c *Client) unreachable() error {
	c.down.mu.Lock()
	defer c.down.mu.Unlock()
	cause := c.down.lastErr
	if cause == nil {
		cause = errors.New("no connection")
	}
	return fmt.Errorf("NBD server %s unreachable since %s: %w (%w)", c.target.Addr,
		c.down.since.Format(time.TimeOnly), cause, syscall.EIO)
}

// do runs one request (within the server's limits) on the next
// connection, sending it again on a fresh one when its connection is lost,
// for as long as GiveUp allows. A request in flight when the server broke
// the protocol fails at once with EIO (see violationError); one that
// found its connection ended by a violation before it was sent is sent
// once more, on a new connection.
func (c *Client) do(typ, flags uint16, off int64, length int, payload, buf []byte) error {
	_, err := c.doCounted(typ, flags, off, length, payload, buf)
	return err
}

// doCounted is do, and reports whether the request had to be sent again
// on another connection because the one it went on was lost.
func (c *Client) doCounted(typ, flags uint16, off int64, length int, payload, buf []byte) (resentAfterLoss bool, err error) {
	var lostAt time.Time
	resent := false
	for {
		i := int(c.next.Add(1)) % len(c.slots)
		cc, err := c.conn(i)
		if err != nil {
			return !lostAt.IsZero(), err
		}
		err = cc.roundTrip(typ, flags, uint64(off), uint32(length), payload, buf)
		if errors.Is(err, syscall.ESHUTDOWN) {
			// The server is going away and says to retry elsewhere:
			// redial (with backoff) rather than ask it again.
			cc.fail(err)
			err = &connLostError{err}
		}
		if errors.Is(err, errServerProtocol) && isConnLost(err) {
			// Never sent: the connection had already failed.
			if resent || c.closed.Load() {
				return !lostAt.IsZero(), &violationError{op: commandName(typ), cause: errors.Unwrap(err)}
			}
			resent = true
			continue
		}
		if !isConnLost(err) || c.closed.Load() {
			return !lostAt.IsZero(), err
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
		} else if time.Since(lostAt) > c.opts.GiveUp {
			return true, fmt.Errorf("NBD %s: %w (%w)", commandName(typ), err, syscall.EIO)
		}
	}
}

// Size returns the export's size.
func (c *Client) Size() int64 { return int64(c.info.size) }

// Caps declares what the server offers.
func (c *Client) Caps() blockdev.Caps {
	f := c.info.flags
	ro := c.readOnly()
	caps := blockdev.Caps{
		ReadOnly:    ro,
		Trim:        !ro && f&FlagSendTrim != 0,
		WriteZeroes: !ro && f&FlagSendWriteZeroes != 0,
		FUA:         !ro && f&FlagSendFUA != 0,
	}
	if c.info.minBlock > 1 {
		caps.BlockSize = int(c.info.minBlock)
	}
	return caps
}

// FlushesCache reports whether Flush reaches the server: false when the
// server does not offer NBD_FLAG_SEND_FLUSH, which says it has no cache
// to flush (every acknowledged write is already stable), and Flush does
// nothing.
func (c *Client) FlushesCache() bool { return c.info.flags&FlagSendFlush != 0 }

// Multi reports how many connections the client uses.
func (c *Client) Multi() int { return len(c.slots) }

// BlockSizes returns the server's block size constraints: minimum,
// preferred and maximum.
func (c *Client) BlockSizes() (minimum, preferred, maximum int) {
	return int(c.info.minBlock), int(c.info.prefBlock), int(c.info.maxBlock)
}

func (c *Client) readOnly() bool { return c.opts.ReadOnly || c.info.flags&FlagReadOnly != 0 }

// Close ends every connection (NBD_CMD_DISC).
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	for _, s := range c.slots {
		s.mu.Lock()
		if s.conn != nil {
			s.conn.close()
		}
		s.mu.Unlock()
	}
	c.violations.Flush() // the violations not logged yet, counted
	return nil
}
