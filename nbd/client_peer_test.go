package nbd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/testtool"
)

// The client against real NBD servers: every test checks the bytes the
// server's file holds, read with os.ReadFile, not only what the client
// reads back.

const peerFileSize = 16 << 20

// servedFile is a file of random bytes for a server to export.
func servedFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	b := make([]byte, peerFileSize)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func dialT(t *testing.T, uri string, opts ClientOptions) *Client {
	t.Helper()
	c, err := Dial(uri, opts)
	if err != nil {
		t.Fatalf("Dial %s: %v", uri, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// checkRoundTrip writes through c (aligned, unaligned, larger than one
// request, concurrently), flushes, and compares the served file and the
// client's reads with what was written.
func checkRoundTrip(t *testing.T, c *Client, file string) {
	t.Helper()
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != int64(len(want)) {
		t.Fatalf("Size %d, the served file has %d", c.Size(), len(want))
	}
	// Disjoint writes, run at once: aligned, unaligned, one larger than a
	// request may be, the last byte.
	writes := []struct{ off, n int }{
		{0, 512}, {777, 1000}, {65536 - 3, 7}, {1 << 20, 5 << 20}, {peerFileSize - 8192, 4096}, {peerFileSize - 1, 1},
	}
	for i := range 8 {
		writes = append(writes, struct{ off, n int }{8<<20 + i*(64<<10), 64 << 10})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(writes))
	for _, w := range writes {
		p := make([]byte, w.n)
		rand.Read(p)
		copy(want[w.off:], p)
		wg.Go(func() {
			if n, err := c.WriteAt(p, int64(w.off)); err != nil || n != len(p) {
				errs <- fmt.Errorf("WriteAt(%d bytes at %d) = %d, %v", len(p), w.off, n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the served file differs from what was written (first at %d)", firstDiff(got, want))
	}
	read := make([]byte, len(want))
	if _, err := c.ReadAt(read, 0); err != nil {
		t.Fatalf("ReadAt of the whole export: %v", err)
	}
	if !bytes.Equal(read, want) {
		t.Fatalf("the client read differs from the file (first at %d)", firstDiff(read, want))
	}
	small := make([]byte, 13)
	if _, err := c.ReadAt(small, 12345); err != nil || !bytes.Equal(small, want[12345:][:13]) {
		t.Fatalf("unaligned ReadAt: %v", err)
	}
	if _, err := c.ReadAt(small, c.Size()-5); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("ReadAt past the end: %v, want ErrOutOfRange", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func nbdkitUnix(t *testing.T, args ...string) (uri string, srv *testtool.PeerServer) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	srv = testtool.StartPeerServer(t, "unix", sock, "nbdkit", append([]string{"-f", "-U", sock}, args...)...)
	return "nbd+unix:///?socket=" + sock, srv
}

func TestClientNbdkitUnix(t *testing.T) {
	file := servedFile(t)
	uri, _ := nbdkitUnix(t, "file", file)
	c := dialT(t, uri, ClientOptions{})
	if !c.FlushesCache() || !c.Caps().Trim {
		t.Errorf("nbdkit file offers flush and trim; client: flush %v, caps %+v", c.FlushesCache(), c.Caps())
	}
	checkRoundTrip(t, c, file)
	if err := c.Trim(0, 1<<20); err != nil {
		t.Fatalf("Trim: %v", err)
	}
	if err := c.WriteZeroes(2<<20, 1<<20); err != nil {
		t.Fatalf("WriteZeroes: %v", err)
	}
	got, _ := os.ReadFile(file)
	if !bytes.Equal(got[2<<20:3<<20], make([]byte, 1<<20)) {
		t.Fatal("WriteZeroes left non-zero bytes in the file")
	}
}

func TestClientNbdkitTCP(t *testing.T) {
	file := servedFile(t)
	addr := testtool.FreeLoopbackPort(t)
	host, port, _ := strings.Cut(addr, ":")
	testtool.StartPeerServer(t, "tcp", addr, "nbdkit", "-f", "-i", host, "-p", port, "file", file)
	checkRoundTrip(t, dialT(t, "nbd://"+addr+"/", ClientOptions{}), file)
}

func TestClientNbdkitTLS(t *testing.T) {
	file := servedFile(t)
	ca := testtool.NewCA(t, "nbd client test CA")
	addr := testtool.FreeLoopbackPort(t)
	host, port, _ := strings.Cut(addr, ":")
	testtool.StartPeerServer(t, "tcp", addr, "nbdkit", "-f", "-i", host, "-p", port,
		"--tls=require", "--tls-certificates", ca.ServerDir(t), "--tls-verify-peer", "file", file)
	uri := "nbds://" + addr + "/?tls-certificates=" + ca.ClientDir(t, "alice", ca)
	checkRoundTrip(t, dialT(t, uri, ClientOptions{}), file)

	// Refused: plaintext, no client certificate, a certificate of another CA.
	other := testtool.NewCA(t, "another CA")
	for name, uri := range map[string]string{
		"plaintext":      "nbd://" + addr + "/",
		"no client cert": "nbds://" + addr + "/?tls-certificates=" + ca.TrustOnlyDir(t),
		"other CA":       "nbds://" + addr + "/?tls-certificates=" + other.ClientDir(t, "mallory", ca),
		"untrusted":      "nbds://" + addr + "/?tls-certificates=" + ca.ClientDir(t, "bob", other),
	} {
		if c, err := Dial(uri, ClientOptions{GiveUp: time.Second}); err == nil {
			c.Close()
			t.Errorf("%s: Dial succeeded against --tls=require --tls-verify-peer", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestClientNbdkitTLSCerttool: certificates as certtool makes them by
// default (RSA) work against nbdkit; a server certificate that the client
// directory's ca-crl.pem revokes is refused; tls-verify-peer=false, as
// libnbd reads it, takes a server no CA vouches for.
func TestClientNbdkitTLSCerttool(t *testing.T) {
	file := servedFile(t)
	p := testtool.NewCerttoolPKI(t)
	addr := testtool.FreeLoopbackPort(t)
	host, port, _ := strings.Cut(addr, ":")
	testtool.StartPeerServer(t, "tcp", addr, "nbdkit", "-f", "-i", host, "-p", port,
		"--tls=require", "--tls-certificates", p.ServerDir, "--tls-verify-peer", "file", file)
	alice := p.ClientDir("alice")
	checkRoundTrip(t, dialT(t, "nbds://"+addr+"/?tls-certificates="+alice, ClientOptions{}), file)

	p.Revoke(alice, filepath.Join(p.ServerDir, "server-cert.pem"))
	c, err := Dial("nbds://"+addr+"/?tls-certificates="+alice, ClientOptions{GiveUp: time.Second})
	if err == nil {
		c.Close()
		t.Fatal("Dial accepted a server certificate that ca-crl.pem revokes")
	}
	if !strings.Contains(err.Error(), "is revoked by ca-crl.pem") {
		t.Errorf("Dial to a revoked server: %v", err)
	}

	// Without verification a client directory needs no ca-cert.pem.
	bare := t.TempDir()
	for _, f := range []string{"client-cert.pem", "client-key.pem"} {
		b, _ := os.ReadFile(filepath.Join(alice, f))
		os.WriteFile(filepath.Join(bare, f), b, 0o600)
	}
	c = dialT(t, "nbds://"+addr+"/?tls-verify-peer=false&tls-certificates="+bare, ClientOptions{})
	if c.Size() != peerFileSize {
		t.Fatalf("size through tls-verify-peer=false: %d", c.Size())
	}
	if _, err := Dial("nbds://"+addr+"/?tls-certificates="+bare, ClientOptions{GiveUp: time.Second}); err == nil {
		t.Error("Dial without ca-cert.pem and with verification succeeded")
	}
}

func TestClientNbdkitTLSUnix(t *testing.T) {
	file := servedFile(t)
	ca := testtool.NewCA(t, "nbd client test CA")
	sock := filepath.Join(t.TempDir(), "tls.sock")
	testtool.StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock,
		"--tls=require", "--tls-certificates", ca.ServerDir(t), "--tls-verify-peer", "file", file)
	uri := "nbds+unix:///?socket=" + sock + "&tls-certificates=" + ca.ClientDir(t, "alice", ca)
	checkRoundTrip(t, dialT(t, uri, ClientOptions{}), file)
}

func TestClientNbdkitReadOnly(t *testing.T) {
	file := servedFile(t)
	before, _ := os.ReadFile(file)
	uri, _ := nbdkitUnix(t, "-r", "file", file)
	c := dialT(t, uri, ClientOptions{})
	if !c.Caps().ReadOnly || c.Caps().Trim || c.Caps().FUA {
		t.Fatalf("caps of a read-only export: %+v", c.Caps())
	}
	_, err := c.WriteAt(make([]byte, 4096), 0)
	if !errors.Is(err, syscall.EPERM) || !errors.Is(err, blockdev.ErrReadOnly) {
		t.Fatalf("WriteAt on nbdkit -r: %v, want EPERM", err)
	}
	if err := c.Trim(0, 4096); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("Trim on nbdkit -r: %v, want EPERM", err)
	}
	// Through blockdev.Open, the way the CLI opens a location.
	b, err := blockdev.Open(uri, blockdev.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.WriteAt(make([]byte, 4096), 4096); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("WriteAt through blockdev.Open on nbdkit -r: %v, want EPERM", err)
	}
	// The server refuses too, when asked (a client told read-write).
	cc, err := c.conn(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.roundTrip(cmdWrite, 0, 0, 4096, make([]byte, 4096), nil); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("nbdkit -r answered a write with %v, want EPERM", err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Fatal("the read-only export's file changed")
	}
}

func TestClientNbdkitBlockSize(t *testing.T) {
	file := servedFile(t)
	uri, _ := nbdkitUnix(t, "--filter=blocksize-policy", "file", file,
		"blocksize-minimum=4096", "blocksize-preferred=65536", "blocksize-maximum=262144",
		"blocksize-error-policy=error")
	c := dialT(t, uri, ClientOptions{})
	if mn, pf, mx := c.BlockSizes(); mn != 4096 || pf != 65536 || mx != 262144 {
		t.Fatalf("block sizes %d %d %d, nbdkit was told 4096 65536 262144", mn, pf, mx)
	}
	if c.Caps().BlockSize != 4096 {
		t.Fatalf("Caps.BlockSize %d, want 4096", c.Caps().BlockSize)
	}
	// The policy filter fails (EINVAL) any request outside the limits: the
	// round trip's unaligned and 5 MiB requests pass only if split and
	// aligned.
	checkRoundTrip(t, c, file)
}

func TestClientNbdkitMultiConn(t *testing.T) {
	file := servedFile(t)
	logFile := filepath.Join(t.TempDir(), "nbdkit.log")
	uri, _ := nbdkitUnix(t, "--filter=log", "--filter=multi-conn", "file", file,
		"logfile="+logFile, "multi-conn-mode=plugin")
	c := dialT(t, uri, ClientOptions{})
	if c.Multi() != defaultConnections() {
		t.Fatalf("%d connections to a server offering multi-conn, want %d", c.Multi(), defaultConnections())
	}
	checkRoundTrip(t, c, file)
	log, _ := os.ReadFile(logFile)
	conns := map[string]bool{}
	for _, line := range strings.Split(string(log), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "connection=") && (strings.Contains(line, " Read ") || strings.Contains(line, " Write ")) {
				conns[f] = true
			}
		}
	}
	if len(conns) != defaultConnections() {
		t.Fatalf("requests went over %d connections (%v), want %d", len(conns), conns, defaultConnections())
	}

	uri1, _ := nbdkitUnix(t, "--filter=multi-conn", "file", file, "multi-conn-mode=disable")
	if c1 := dialT(t, uri1, ClientOptions{}); c1.Multi() != 1 {
		t.Fatalf("%d connections to a server without multi-conn, want 1", c1.Multi())
	}
}

func TestClientQemuNbd(t *testing.T) {
	file := servedFile(t)
	sock := filepath.Join(t.TempDir(), "qemu.sock")
	testtool.StartPeerServer(t, "unix", sock, "qemu-nbd", "--persistent", "-f", "raw", "-k", sock, file)
	checkRoundTrip(t, dialT(t, "nbd+unix:///?socket="+sock, ClientOptions{}), file)
}

func TestClientNbdServer(t *testing.T) {
	file := servedFile(t)
	dir := t.TempDir()
	addr := testtool.FreeLoopbackPort(t)
	host, port, _ := strings.Cut(addr, ":")
	conf := filepath.Join(dir, "config")
	text := fmt.Sprintf("[generic]\nlistenaddr = %s\nport = %s\n[disk]\nexportname = %s\n", host, port, file)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// -d keeps nbd-server in the foreground, where it serves one
	// connection: no multi-conn here.
	testtool.StartPeerServer(t, "tcp", addr, "nbd-server", "-C", conf, "-d")
	c := dialT(t, "nbd://"+addr+"/disk", ClientOptions{Connections: 1})
	// nbd-server 3.24 offers neither flush nor trim by default: Flush
	// is a no-op that says so, Trim is refused.
	if c.FlushesCache() || c.Caps().Trim {
		t.Errorf("nbd-server's flags %#x: FlushesCache %v, Caps %+v", c.info.flags, c.FlushesCache(), c.Caps())
	}
	if err := c.Trim(0, 4096); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Errorf("Trim on a server without trim: %v", err)
	}
	checkRoundTrip(t, c, file)
}

// TestClientNbdkitSimpleReplies: nbdkit --no-sr refuses structured
// replies, and reads come back as simple replies.
func TestClientNbdkitSimpleReplies(t *testing.T) {
	file := servedFile(t)
	uri, _ := nbdkitUnix(t, "--no-sr", "file", file)
	c := dialT(t, uri, ClientOptions{})
	if c.info.structured {
		t.Fatal("structured replies agreed with nbdkit --no-sr")
	}
	checkRoundTrip(t, c, file)
}
