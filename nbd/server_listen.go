package nbd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// DefaultPort is the NBD port assigned by IANA.
const DefaultPort = "10809"

// ListenUnix listens on a unix socket at path with the given permissions
// (0600 when mode is 0). The socket never exists with wider permissions. A
// stale socket left by a dead server is replaced; a live one is an error.
func ListenUnix(path string, mode os.FileMode) (net.Listener, error) {
	if mode == 0 {
		mode = 0o600
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: a server is already listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	// The umask makes bind create the socket inaccessible to others; the
	// chmod then sets exactly the mode asked for.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ListenTCP listens on addr ("HOST:PORT", "HOST", ":PORT" or "PORT"). An
// empty host means 127.0.0.1 and an empty port the NBD port: other
// interfaces are reached only when named.
func ListenTCP(addr string) (net.Listener, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if !errors.As(err, &ae) || ae.Err != "missing port in address" {
			return nil, fmt.Errorf("bad listen address %q: %v", addr, err)
		}
		host, port = addr, ""
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = DefaultPort
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}
