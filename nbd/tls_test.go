package nbd

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// tlsExport is a memory device served on loopback TCP with TLS.
type tlsExport struct {
	srv  *Server
	addr string
	dev  *devtest.Mem
	ca   *testtool.CA
	mu   sync.Mutex
	logs []string
}

// serveTLS serves a 4 MiB memory device on 127.0.0.1 with mode, the
// certificates of serverDir (a fresh CA's when ""), and, with verify,
// client certificates required.
func serveTLS(t *testing.T, mode TLSMode, serverDir string, verify bool, cfg Config) *tlsExport {
	t.Helper()
	e := &tlsExport{dev: devtest.NewMem(4 << 20)}
	if serverDir == "" {
		e.ca = testtool.NewCA(t, "luksd test CA")
		serverDir = e.ca.ServerDir(t)
	}
	tc, err := LoadTLSDir(serverDir, verify)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS, cfg.TLSMode = tc, mode
	cfg.Logf = func(f string, a ...any) {
		e.mu.Lock()
		e.logs = append(e.logs, fmt.Sprintf(f, a...))
		e.mu.Unlock()
	}
	e.srv = NewServer(e.dev, cfg)
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = l.Addr().String()
	done := make(chan struct{})
	go func() { e.srv.Serve(l); close(done) }()
	t.Cleanup(func() {
		e.srv.Close()
		<-done
		if t.Failed() {
			t.Logf("server log:\n%s", strings.Join(e.logs, "\n"))
		}
	})
	return e
}

// logged waits a little for a log line containing all of words.
func (e *tlsExport) logged(t *testing.T, words ...string) string {
	t.Helper()
	for range 200 {
		e.mu.Lock()
		for _, l := range e.logs {
			if containsAll(l, words...) {
				e.mu.Unlock()
				return l
			}
		}
		e.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Fatalf("no log line with %q in:\n%s", words, strings.Join(e.logs, "\n"))
	return ""
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// clientTLS is a Go TLS client config that trusts the CA in dir and
// presents dir's client certificate when there is one.
func clientTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dir, "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem")); err == nil {
		// Sent whoever signed it, as libnbd and qemu do (crypto/tls would
		// leave out one the server's CA list does not name).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

// startTLS sends NBD_OPT_STARTTLS, expects NBD_REP_ACK and runs the TLS
// handshake; from then on rc talks through TLS. A handshake error is
// returned (in TLS 1.3 a refused client certificate shows only at the
// first read).
func (rc *rawClient) startTLS(t *testing.T, cfg *tls.Config) error {
	t.Helper()
	if types, p := rc.option(t, optStartTLS, nil); len(types) != 1 || types[0] != repAck {
		t.Fatalf("STARTTLS: replies %#x %q", types, p)
	}
	tc := tls.Client(rc.c, cfg)
	rc.c, rc.r = tc, bufio.NewReader(tc)
	return tc.Handshake()
}

// refusedAfterTLS reports whether the server ends the connection where
// it must after a TLS handshake it refused: the next read fails.
func (rc *rawClient) refusedAfterTLS(t *testing.T) error {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rc.send(t, optionBytes(optList, nil))
	_, err := io.ReadFull(rc.r, make([]byte, optReplyHeaderLen))
	return err
}

// TestStartTLSRequire walks the FORCEDTLS state machine: every option but
// STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD until TLS is
// up, STARTTLS with data is invalid, STARTTLS again is invalid, and the
// export is served through TLS.
func TestStartTLSRequire(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", true, Config{Name: "vol"})
	c := dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	for _, tc := range []struct {
		name string
		opt  uint32
		data []byte
	}{
		{"list", optList, nil},
		{"go", optGo, goData("vol")},
		{"info", optInfo, goData("vol")},
		{"structured reply", optStructuredReply, nil},
		{"meta context", optListMetaContext, metaData("vol", baseAllocation)},
		{"unknown", 0x7777, []byte("zz")},
	} {
		if types, _ := c.option(t, tc.opt, tc.data); len(types) != 1 || types[0] != repErrTLSReqd {
			t.Errorf("%s before TLS: replies %#x, want NBD_REP_ERR_TLS_REQD", tc.name, types)
		}
	}
	if types, _ := c.option(t, optStartTLS, []byte("x")); len(types) != 1 || types[0] != repErrInvalid {
		t.Errorf("STARTTLS with data: replies %#x, want NBD_REP_ERR_INVALID", types)
	}
	if err := c.startTLS(t, clientTLS(t, e.ca.ClientDir(t, "alice", e.ca))); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if types, _ := c.option(t, optStartTLS, nil); len(types) != 1 || types[0] != repErrInvalid {
		t.Errorf("STARTTLS inside TLS: replies %#x, want NBD_REP_ERR_INVALID", types)
	}
	if types, _ := c.option(t, optList, nil); types[len(types)-1] != repAck {
		t.Errorf("list inside TLS: replies %#x", types)
	}
	if types, _ := c.option(t, optGo, goData("vol")); types[len(types)-1] != repAck {
		t.Fatalf("go inside TLS: replies %#x", types)
	}
	if code := c.write(t, 8192, []byte("through TLS"), cmdFlagFUA); code != 0 {
		t.Fatalf("write: %d", code)
	}
	if b, code := c.read(t, 8192, 11); code != 0 || string(b) != "through TLS" {
		t.Fatalf("read: %q %d", b, code)
	}
	got := make([]byte, 11)
	e.dev.ReadAt(got, 8192)
	if string(got) != "through TLS" {
		t.Fatalf("device holds %q", got)
	}
	e.logged(t, "TLS 1.3", "client certificate CN=alice,O=luksd tests")
}

// TestStartTLSRequireRefusals: a plaintext client that gives up, one that
// enters transmission by NBD_OPT_EXPORT_NAME, and one that pipelines
// plaintext behind STARTTLS are all refused, each with a log line.
func TestStartTLSRequireRefusals(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", false, Config{Name: "vol"})

	c := dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew)
	if types, _ := c.option(t, optGo, goData("vol")); types[0] != repErrTLSReqd {
		t.Fatalf("go: %#x", types)
	}
	if types, _ := c.option(t, optAbort, nil); types[0] != repAck {
		t.Fatalf("abort: %#x", types)
	}
	e.logged(t, "handshake failed", "TLS, which the server requires", "1 options refused", "aborted")

	c = dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew)
	c.send(t, optionBytes(optExportName, []byte("vol")))
	if !c.closed(t) {
		t.Fatal("NBD_OPT_EXPORT_NAME without TLS: the server kept the connection")
	}
	e.logged(t, "NBD_OPT_EXPORT_NAME without TLS")

	// STARTTLS and, in the same write, a plaintext option that a
	// man in the middle would like the server to take as sent through TLS.
	c = dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew)
	c.send(t, append(optionBytes(optStartTLS, nil), optionBytes(optStructuredReply, nil)...))
	if !c.closed(t) {
		t.Fatal("plaintext after STARTTLS: the server kept the connection")
	}
	e.logged(t, "plaintext bytes sent after NBD_OPT_STARTTLS")
}

// TestStartTLSBadClientCertificates: with client verification, a client
// without a certificate or with one from another CA fails the TLS
// handshake; the server hangs up (the protocol has no way back to
// plaintext), logs why, and serves the next client.
func TestStartTLSBadClientCertificates(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", true, Config{})
	other := testtool.NewCA(t, "another CA")
	for _, tc := range []struct {
		name, dir, log string
	}{
		{"no certificate", e.ca.TrustOnlyDir(t), "certificate"},
		{"another CA", other.ClientDir(t, "mallory", e.ca), "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRawNet(t, "tcp", e.addr)
			c.greet(t, flagCFixedNew)
			err := c.startTLS(t, clientTLS(t, tc.dir))
			if err == nil {
				err = c.refusedAfterTLS(t)
			}
			if err == nil {
				t.Fatal("the server went on after a bad client certificate")
			}
			e.logged(t, "TLS handshake", tc.log)
			// Options after the failed handshake find the connection gone.
			if _, err := c.c.Write(optionBytes(optGo, goData(""))); err == nil {
				if _, err := io.ReadFull(c.r, make([]byte, 1)); err == nil {
					t.Fatal("an option after the failed handshake was answered")
				}
			}
		})
	}
	c := dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew)
	if err := c.startTLS(t, clientTLS(t, e.ca.ClientDir(t, "alice", e.ca))); err != nil {
		t.Fatal(err)
	}
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("a good client after the bad ones: %#x", types)
	}
}

// TestStartTLSOn: with TLS on, a plaintext client is served, and what a
// client agreed before STARTTLS (structured replies) is forgotten in the
// TLS session.
func TestStartTLSOn(t *testing.T) {
	e := serveTLS(t, TLSOn, "", false, Config{})
	plain := dialGoTCP(t, e.addr)
	if code := plain.write(t, 0, []byte("plain"), 0); code != 0 {
		t.Fatalf("plaintext write: %d", code)
	}

	c := dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	if types, _ := c.option(t, optStructuredReply, nil); types[0] != repAck {
		t.Fatalf("structured reply: %#x", types)
	}
	if err := c.startTLS(t, clientTLS(t, e.ca.TrustOnlyDir(t))); err != nil {
		t.Fatal(err)
	}
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("go: %#x", types)
	}
	// Simple replies: structured replies were not asked for inside TLS.
	if b, code := c.read(t, 0, 5); code != 0 || string(b) != "plain" {
		t.Fatalf("read through TLS: %q %d", b, code)
	}
	e.logged(t, "TLS 1.3", "no client certificate")
}

func dialGoTCP(t *testing.T, addr string) *rawClient {
	t.Helper()
	c := dialRawNet(t, "tcp", addr)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("NBD_OPT_GO refused: %#x", types)
	}
	return c
}

func TestLoadTLSDirErrors(t *testing.T) {
	ca := testtool.NewCA(t, "ca")
	if _, err := LoadTLSDir(t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "server-cert.pem") {
		t.Errorf("empty dir: %v", err)
	}
	dir := ca.ServerDir(t)
	os.Remove(filepath.Join(dir, TLSCACertFile))
	if _, err := LoadTLSDir(dir, false); err != nil {
		t.Errorf("without ca-cert.pem and verification: %v", err)
	}
	if _, err := LoadTLSDir(dir, true); err == nil || !strings.Contains(err.Error(), "ca-cert.pem") {
		t.Errorf("verification without ca-cert.pem: %v", err)
	}
	os.WriteFile(filepath.Join(dir, TLSCACertFile), []byte("not PEM"), 0o600)
	if _, err := LoadTLSDir(dir, true); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("garbage ca-cert.pem: %v", err)
	}
}

func TestParseTLSMode(t *testing.T) {
	for in, want := range map[string]TLSMode{"off": TLSOff, "on": TLSOn, "require": TLSRequire, "yes": TLSOn, "no": TLSOff} {
		if got, err := ParseTLSMode(in); err != nil || got != want {
			t.Errorf("ParseTLSMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseTLSMode("maybe"); err == nil {
		t.Error("ParseTLSMode accepted maybe")
	}
}
