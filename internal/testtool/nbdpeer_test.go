package testtool

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A peer server's connections are counted while a client holds one, and
// WaitIdle returns once the client has gone and the server closed it.
func TestPeerServerConnections(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	s := StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock, "file", disk)
	s.WaitIdle() // the readiness probe's connection
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.connections() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.connections(); n != 1 {
		t.Fatalf("a client connected, the server holds %d connections", n)
	}
	c.Close()
	s.WaitIdle()
}
