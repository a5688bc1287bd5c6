package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon/daemontest"
	"github.com/luksd/luksd/internal/testtool"
)

// tcpServe is a `luksd serve --listen 127.0.0.1:0` and its log so far.
type tcpServe struct {
	cmd    *exec.Cmd
	exited chan struct{}
	addr   string
	log    daemontest.LogBuffer // its stderr
}

func (p *tcpServe) logged() string { return p.log.String() }

// startTCPServe runs luksd serve on an ephemeral loopback port and waits
// for the log line that names it.
func startTCPServe(t *testing.T, args ...string) *tcpServe {
	t.Helper()
	p := &tcpServe{exited: make(chan struct{})}
	p.cmd = exec.Command(testtool.Luksd(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	re := regexp.MustCompile(`serving .* on nbd://(127\.0\.0\.1:\d+)/`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.logged()); m != nil {
			p.addr = m[1]
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("luksd serve exited: %s", p.logged())
		default:
		}
	}
	t.Fatalf("luksd serve did not say where it listens: %s", p.logged())
	return nil
}

func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 24<<20, "--type", "luks2", "--sector-size", "4096")
	ca := testtool.NewCA(t, "serve test CA")
	p := startTCPServe(t, "--tls=require", "--tls-certificates", ca.ServerDir(t), "--tls-verify-peer", "--key-file", key, img)
	if !strings.Contains(p.logged(), "TLS require, client certificates verified") {
		t.Errorf("the start line does not say TLS is required: %s", p.logged())
	}
	nbds := "nbds://" + p.addr + "/?tls-certificates="

	data := make([]byte, 4<<20)
	rand.Read(data)
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", src, nbds+ca.ClientDir(t, "writer", ca))
	testtool.Run(t, "nbdcopy", nbds+ca.ClientDir(t, "reader", ca), back)
	if b, _ := os.ReadFile(back); !bytes.Equal(b[:len(data)], data) {
		t.Fatal("data read back through TLS differs")
	}
	for _, uri := range []string{"nbd://" + p.addr + "/", nbds + ca.TrustOnlyDir(t)} {
		if out, err := testtool.Output(t, "nbdinfo", "--size", uri); err == nil {
			t.Errorf("%s got in: %s", uri, out)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	if !p.cmd.ProcessState.Success() {
		t.Errorf("luksd serve after SIGTERM: %v", p.cmd.ProcessState)
	}
	log := p.logged()
	for _, want := range []string{"CN=writer,O=luksd tests", "CN=reader", "TLS, which the server requires", "didn't provide a certificate", ": closed"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}

	// The image decrypts, with cryptsetup's volume key, to what was sent.
	vk, off := serveVolumeKey(t, img, key)
	if !bytes.Equal(xtsDecrypt(t, img, vk, off, int64(len(data)), 4096), data) {
		t.Fatal("the image does not decrypt to the data sent through TLS")
	}
}

// TestServeTLSBadOptions: wrong TLS options are one line and exit 1,
// before any passphrase is read.
func TestServeTLSBadOptions(t *testing.T) {
	dir := t.TempDir()
	img, _ := serveFormat(t, dir, 20<<20, "--type", "luks2")
	ca := testtool.NewCA(t, "ca")
	noCA := ca.ServerDir(t)
	os.Remove(filepath.Join(noCA, "ca-cert.pem"))
	badAccess := filepath.Join(dir, "access")
	os.WriteFile(badAccess, []byte("# ok\nvol rw cn=alice\nvol rx cn=bob\n"), 0o600)
	withAccess := func(file string) []string {
		return []string{"--tls=require", "--tls-certificates", ca.ServerDir(t), "--tls-verify-peer", "--tls-access", file}
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"bad mode", []string{"--tls=maybe"}, "bad TLS mode"},
		{"no directory", []string{"--tls=require"}, "Option --tls=require needs --tls-certificates DIR."},
		{"directory without --tls", []string{"--tls-certificates", ca.ServerDir(t)}, "need --tls=on or --tls=require"},
		{"empty directory", []string{"--tls=on", "--tls-certificates", t.TempDir()}, "server-cert.pem"},
		{"verify without CA", []string{"--tls=on", "--tls-verify-peer", "--tls-certificates", noCA}, "ca-cert.pem"},
		{"malformed access file", withAccess(badAccess), "access file " + badAccess + ": line 3: access \"rx\" is neither rw nor ro"},
		{"missing access file", withAccess(badAccess + ".none"), "no such file"},
		{"access without verify", []string{"--tls=on", "--tls-certificates", ca.ServerDir(t), "--tls-access", badAccess}, "--tls-access needs --tls-verify-peer"},
	} {
		// No --key-file and no terminal: reading a passphrase would fail
		// differently; stdin is empty.
		cmd := exec.Command(testtool.Luksd(t), append(append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...), img)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitParams || !strings.Contains(string(out), tc.msg) {
			t.Errorf("%s: exit %v, output %q; want exit 1 and %q", tc.name, err, out, tc.msg)
		}
		if strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%s: more than one line: %q", tc.name, out)
		}
	}
}

// TestServeTLSAccess: --tls-access grants writer read-write and reader
// read-only; a third client is refused, and the log names it.
func TestServeTLSAccess(t *testing.T) {
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 24<<20, "--type", "luks2")
	ca := testtool.NewCA(t, "access CA")
	access := filepath.Join(dir, "access")
	os.WriteFile(access, []byte("# export access client\nvol rw cn=writer\n* ro subject=CN=reader,O=luksd tests\n"), 0o600)
	p := startTCPServe(t, "--export-name", "vol", "--tls=require", "--tls-certificates", ca.ServerDir(t),
		"--tls-verify-peer", "--tls-access", access, "--key-file", key, img)
	nbds := "nbds://" + p.addr + "/vol?tls-certificates="
	data := make([]byte, 1<<20)
	rand.Read(data)
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", src, nbds+ca.ClientDir(t, "writer", ca))
	if out, err := testtool.Output(t, "nbdcopy", src, nbds+ca.ClientDir(t, "reader", ca)); err == nil {
		t.Errorf("the read-only client wrote: %s", out)
	}
	testtool.Run(t, "nbdcopy", nbds+ca.ClientDir(t, "reader", ca), back)
	if b, _ := os.ReadFile(back); !bytes.Equal(b[:len(data)], data) {
		t.Error("the read-only client reads other data")
	}
	if out, err := testtool.Output(t, "nbdinfo", "--size", nbds+ca.ClientDir(t, "mallory", ca)); err == nil {
		t.Errorf("mallory got in: %s", out)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.logged(), "CN=mallory,O=luksd tests may not use export \"vol\""); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal line in the log:\n%s", p.logged())
		}
	}
}
