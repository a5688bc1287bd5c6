package nbd

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nbd.ko gives a connection up as dead when a request on it times out, or
// when the server's end fails or closes: it shuts the socket down, sends
// the connection's requests again on the others (or queues them, up to
// DeadConnTimeout, when none is left) and takes a fresh socket in the dead
// one's place through NBD_CMD_RECONFIGURE. A disconnect is different: the
// kernel sends NBD_CMD_DISC on every live connection first, and once it is
// done the device refuses reconfigures (EINVAL).
//
// So each connection slot of an Attachment serves its socket until Serve
// returns: nil (NBD_CMD_DISC, or the server closed) ends the slot; an error
// while the device is attached means the kernel dropped the connection, and
// the slot offers the kernel a new socket and serves that. (The Server's
// ServeTransmission returns as soon as a connection is lost, while a
// stalled device may still hold its requests.) The requests that were in
// flight on the lost connection are the kernel's to send again: see
// AttachConfig.Timeout.

// How long a slot keeps offering sockets the kernel does not take: it
// takes one only in place of a connection it has marked dead, which it
// does a moment after the server's end failed.
const (
	reconnectFirstWait = 10 * time.Millisecond
	reconnectMaxWait   = time.Second
	reconnectGiveUp    = time.Minute
)

// errNotTaken: the kernel had no dead connection to replace (yet).
var errNotTaken = errors.New("the kernel did not take the socket")

// serveSlot serves one connection slot, replacing lost connections.
func (a *Attachment) serveSlot(slot int, conn net.Conn) {
	defer a.wg.Done()
	for {
		err := a.cfg.Serve(conn)
		if err == nil || !a.replacing() || a.wasDropped(slot) {
			return
		}
		a.logf("nbd: %s: connection %d lost (%v), reconnecting", a.DevicePath(), slot, err)
		conn, err = a.reconnect(slot)
		if err != nil {
			if !a.replacing() {
				return
			}
			a.mu.Lock()
			if a.err == nil {
				a.err = err
			}
			a.mu.Unlock()
			a.logf("nbd: %s: connection %d: %v", a.DevicePath(), slot, err)
			return
		}
		a.logf("nbd: %s: connection %d reconnected", a.DevicePath(), slot)
	}
}

// replacing reports whether lost connections are to be replaced: the
// device is attached and Detach was not called.
func (a *Attachment) replacing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live && !a.closed
}

// wasDropped reports whether the kernel did not take slot's first socket.
func (a *Attachment) wasDropped(slot int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dropped[slot]
}

// reconnect offers the kernel new sockets for slot until it takes one, and
// returns the server's end.
func (a *Attachment) reconnect(slot int) (net.Conn, error) {
	start := time.Now()
	for wait := reconnectFirstWait; ; wait = min(2*wait, reconnectMaxWait) {
		conn, err := a.offerSocket()
		if err == nil {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.closed {
				conn.Close()
				return nil, errors.New("detached")
			}
			a.conns[slot] = conn
			a.reconnects++
			return conn, nil
		}
		if !errors.Is(err, errNotTaken) {
			return nil, err
		}
		if time.Since(start) > reconnectGiveUp {
			return nil, fmt.Errorf("nbd: %s kept no dead connection to replace for %v", a.DevicePath(), reconnectGiveUp)
		}
		time.Sleep(wait)
		if !a.replacing() {
			return nil, errors.New("detached")
		}
	}
}

// offerSocket hands the kernel one new socket for a dead connection of the
// device (NBD_CMD_RECONFIGURE, with the device's backend identifier) and
// returns the server's end, or errNotTaken.
func (a *Attachment) offerSocket() (net.Conn, error) {
	kfd, conn, err := socketPair()
	if err != nil {
		return nil, err
	}
	req := connectRequest{Index: a.index, Sockets: []uint32{uint32(kfd)}, BackendID: a.cfg.Backend, reconfigureOnly: true}
	body, err := req.encode()
	if err == nil {
		_, err = execute(a.cfg.netlink(), "reconfigure", a.index, genlCmdReconfigure, body)
	}
	// Once this end is closed, the kernel's reference is the only one.
	unix.Close(kfd)
	if err != nil {
		conn.Close()
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("nbd: %s takes no connections any more (disconnected)", a.DevicePath())
		}
		return nil, err
	}
	// nbd.ko answers a reconfigure that finds no dead connection with
	// success and drops the socket: then the peer has gone already.
	if peerClosed(conn) {
		conn.Close()
		return nil, errNotTaken
	}
	return conn, nil
}

// peerClosed reports whether the other end of a unix socket is closed (or
// this end already is), without waiting or consuming data.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = n == 0 && err == nil
	}); err != nil {
		return true
	}
	return closed
}

func (a *Attachment) logf(format string, args ...any) {
	if a.cfg.Logf != nil {
		a.cfg.Logf(format, args...)
	}
}
