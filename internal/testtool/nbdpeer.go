package testtool

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PeerServer is a real NBD server (nbdkit, qemu-nbd, nbd-server) run in
// the foreground for a test, which the test may kill and start again on
// the same address.
type PeerServer struct {
	t       testing.TB
	prog    string
	args    []string
	network string // where it listens, to wait for: "unix" or "tcp"
	addr    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been reaped
}

// StartPeerServer runs prog with args (foreground) and waits until it
// accepts connections on addr (a socket path for network "unix",
// HOST:PORT for "tcp"). It is killed when the test ends.
func StartPeerServer(t testing.TB, network, addr, prog string, args ...string) *PeerServer {
	t.Helper()
	s := &PeerServer{t: t, prog: Need(t, prog), args: args, network: network, addr: addr}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start starts the server (again) and waits until it accepts connections.
func (s *PeerServer) Start() {
	s.t.Helper()
	if s.network == "unix" {
		os.Remove(s.addr) // a killed server leaves its socket behind
	}
	cmd := exec.Command(s.prog, s.args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			s.t.Fatalf("%s %v exited before it listened", s.prog, s.args)
		default:
		}
		if s.listening() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	s.t.Fatalf("%s did not listen on %s within 30 s", s.prog, s.addr)
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (s *PeerServer) Kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// listening reports whether the server listens on its address.
func (s *PeerServer) listening() bool {
	if s.network == "tcp" {
		return listeningOn(s.addr)
	}
	c, err := net.DialTimeout(s.network, s.addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// Stop asks the server to shut down (SIGTERM), as an operator's restart
// would, and waits until it has.
func (s *PeerServer) Stop() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.Kill()
		}
	}
}

// WaitIdle waits until the server holds no client connection. A server
// still carries out the requests a killed client had sent it; a test
// that reads the disk next, or starts the next writer, must not race
// those late writes.
func (s *PeerServer) WaitIdle() {
	s.t.Helper()
	n := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if n = s.connections(); n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("%s still holds %d connections after 30 s", s.prog, n)
}

// connections counts the server's sockets that are not listening, from
// its open files and the kernel's socket tables.
func (s *PeerServer) connections() int {
	fdDir := fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return 0 // it has exited: it holds nothing
	}
	listening := listeningSockets()
	n := 0
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		inode, ok := strings.CutPrefix(link, "socket:[")
		if err == nil && ok && !listening[strings.TrimSuffix(inode, "]")] {
			n++
		}
	}
	return n
}
