package testtool

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeLoopbackPort returns 127.0.0.1:PORT for a port nothing listens on
// now. The port is taken below the kernel's ephemeral range, where no
// outgoing connection (of the many other tests make on loopback) can be
// given it before the caller's server binds it; another test's server
// still may, which is rare.
func FreeLoopbackPort(t testing.TB) string {
	t.Helper()
	lo, _ := ephemeralPorts()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 1024+rand.IntN(lo-1024))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatalf("no free loopback port below %d in 100 tries", lo)
	return ""
}

// ephemeralPorts is the kernel's range for outgoing connections' ports.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 2048 {
			return lo, hi
		}
	}
	return 32768, 60999 // Linux's default
}

// listeningOn reports whether a socket listens on TCP address addr
// (127.0.0.1:PORT), from the kernel's socket table: neither connecting
// (nbd-server -d serves one connection only) nor binding the port to
// see whether it is taken (a probe that binds it can take it from under
// a server about to bind it).
func listeningOn(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host).To4()
	n, perr := strconv.Atoi(port)
	if err != nil || ip == nil || perr != nil {
		return false
	}
	// /proc/net/tcp prints an IPv4 address as its 32 bits in host
	// (little-endian) order, then the port, in hex.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], n)
	wildcard := fmt.Sprintf("00000000:%04X", n)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" && (f[1] == local || f[1] == wildcard) { // 0A: LISTEN
			return true
		}
	}
	return false
}

// listeningSockets is the set of inodes of the sockets that listen, in
// the kernel's tables of Unix and TCP sockets.
func listeningSockets() map[string]bool {
	set := map[string]bool{}
	if b, err := os.ReadFile("/proc/net/unix"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// Flags (column 4) has __SO_ACCEPTCON (1<<16) on a listener.
			f := strings.Fields(line)
			if len(f) < 7 {
				continue
			}
			if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&(1<<16) != 0 {
				set[f[6]] = true
			}
		}
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 && f[3] == "0A" { // 0A: LISTEN
				set[f[9]] = true
			}
		}
	}
	return set
}
