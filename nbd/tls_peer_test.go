package nbd

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Real NBD clients over TLS: libnbd's (nbdinfo, nbdcopy, fio's nbd engine)
// and qemu's, which have their own TLS stacks (GnuTLS).

func (e *tlsExport) tlsURI(clientDir string) string {
	return "nbds://" + e.addr + "/?tls-certificates=" + clientDir
}

func (e *tlsExport) plainURI() string { return "nbd://" + e.addr + "/" }

// qemuTLSArgs are qemu-img's arguments to open the export through TLS
// with the certificates in clientDir.
func (e *tlsExport) qemuTLSArgs(clientDir string) []string {
	host, port, _ := net.SplitHostPort(e.addr)
	return []string{"--object", "tls-creds-x509,id=tls0,endpoint=client,dir=" + clientDir,
		"--image-opts", "driver=nbd,server.type=inet,server.host=" + host + ",server.port=" + port + ",tls-creds=tls0"}
}

func TestTLSRealClients(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dirs    func(t *testing.T) (server, client string)
		version string // what the server settles with libnbd
	}{
		{"openssl-certificates", func(t *testing.T) (string, string) {
			testtool.Need(t, "openssl")
			return testtool.OpenSSLDirs(t, "alice")
		}, "TLS 1.3"},
		{"go-certificates", func(t *testing.T) (string, string) {
			ca := testtool.NewCA(t, "go CA")
			return ca.ServerDir(t), ca.ClientDir(t, "alice", ca)
		}, "TLS 1.3"},
		// certtool's defaults, RSA keys: GnuTLS sends an RSA client
		// certificate to crypto/tls only over TLS 1.2 (tls_gnutls.go).
		{"certtool-rsa-certificates", func(t *testing.T) (string, string) {
			p := testtool.NewCerttoolPKI(t)
			return p.ServerDir, p.ClientDir("alice")
		}, "TLS 1.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serverDir, clientDir := tc.dirs(t)
			e := serveTLS(t, TLSRequire, serverDir, true, Config{Name: "vol"})
			out := testtool.Run(t, "nbdinfo", "--json", e.tlsURI(clientDir))
			var info struct {
				Exports []struct {
					Size int64 `json:"export-size"`
				} `json:"exports"`
				TLS bool `json:"TLS"`
			}
			if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Exports) != 1 || info.Exports[0].Size != 4<<20 {
				t.Fatalf("nbdinfo --json: %v\n%s", err, out)
			}
			e.logged(t, tc.version, "client certificate CN=alice")

			dir := t.TempDir()
			src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
			data := make([]byte, 4<<20)
			rand.Read(data)
			os.WriteFile(src, data, 0o600)
			testtool.Run(t, "nbdcopy", src, e.tlsURI(clientDir))
			got := make([]byte, len(data))
			e.dev.ReadAt(got, 0)
			if !bytes.Equal(got, data) {
				t.Fatal("the device does not hold what nbdcopy wrote through TLS")
			}
			args := append([]string{"convert", "-O", "raw"}, e.qemuTLSArgs(clientDir)...)
			testtool.Run(t, "qemu-img", append(args, back)...)
			if b, _ := os.ReadFile(back); !bytes.Equal(b, data) {
				t.Fatal("qemu-img read through TLS differs from the data")
			}
		})
	}
}

// TestTLSRealClientsRefused: libnbd and qemu clients without a client
// certificate, with one from another CA, or without TLS against a server
// that requires it, are refused, and the server says why in its log.
func TestTLSRealClientsRefused(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", true, Config{})
	other := testtool.NewCA(t, "another CA")
	for _, tc := range []struct {
		name      string
		uri       string
		clientErr string // in nbdinfo's message
		serverLog string
	}{
		{"no-certificate", e.tlsURI(e.ca.TrustOnlyDir(t)), "TLS", "didn't provide a certificate"},
		// GnuTLS sends no certificate the server's CA list does not name.
		{"another-CA", e.tlsURI(other.ClientDir(t, "mallory", e.ca)), "TLS", "didn't provide a certificate"},
		{"plaintext", e.plainURI(), "TLS", "TLS, which the server requires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := testtool.Output(t, "nbdinfo", "--size", tc.uri)
			if err == nil {
				t.Fatalf("nbdinfo got in: %s", out)
			}
			if !strings.Contains(out, tc.clientErr) {
				t.Errorf("nbdinfo's error does not mention %q: %s", tc.clientErr, out)
			}
			e.logged(t, "handshake failed", tc.serverLog)
			t.Logf("nbdinfo: %s", strings.TrimSpace(out))
		})
	}
	// qemu's client too, without a certificate.
	args := append([]string{"info"}, e.qemuTLSArgs(e.ca.TrustOnlyDir(t))...)
	if out, err := testtool.Output(t, "qemu-img", args...); err == nil {
		t.Fatalf("qemu-img without a client certificate got in: %s", out)
	}
}

// TestTLSRevokedClientRefused: a client certificate that the server
// directory's ca-crl.pem revokes is refused, as nbdkit refuses it; the
// CA's other clients get in.
func TestTLSRevokedClientRefused(t *testing.T) {
	p := testtool.NewCerttoolPKI(t)
	alice, bob := p.ClientDir("alice"), p.ClientDir("bob")
	p.Revoke(p.ServerDir, filepath.Join(bob, "client-cert.pem"))
	e := serveTLS(t, TLSRequire, p.ServerDir, true, Config{})
	if out, err := testtool.Output(t, "nbdinfo", "--size", e.tlsURI(bob)); err == nil {
		t.Fatalf("nbdinfo with a revoked certificate got in: %s", out)
	}
	e.logged(t, "handshake failed", "CN=bob", "is revoked by ca-crl.pem")
	if out := testtool.Run(t, "nbdinfo", "--size", e.tlsURI(alice)); strings.TrimSpace(out) != "4194304" {
		t.Fatalf("nbdinfo --size with alice's certificate: %s", out)
	}
	e.logged(t, "client certificate CN=alice")
}

// TestTLSFioVerify: fio's nbd engine writes and verifies through TLS (a
// server that requires TLS but no client certificate: fio cannot pass
// libnbd a certificate directory, see TestTLSQemuIOVerify).
func TestTLSFioVerify(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", false, Config{})
	out := testtool.Run(t, "fio", "--name=tlsverify", "--ioengine=nbd",
		"--uri=nbds://"+e.addr+"/?tls-verify-peer=false", "--rw=randwrite", "--bs=4k", "--size=4M",
		"--iodepth=16", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0",
		"--output-format=terse")
	// Terse version 3: the fifth field is the job's error; libnbd's
	// "connected" line comes first.
	i := strings.Index(out, "3;fio")
	if i < 0 || strings.Split(out[i:], ";")[4] != "0" {
		t.Fatalf("fio verify over TLS did not end cleanly:\n%s", out)
	}
	e.logged(t, "TLS 1.3", "no client certificate")
}

// TestTLSOnServesBothSideBySide: with --tls=on, a TLS client and a
// plaintext client copy the export out at the same time.
func TestTLSOnServesBothSideBySide(t *testing.T) {
	e := serveTLS(t, TLSOn, "", false, Config{})
	data := make([]byte, 4<<20)
	rand.Read(data)
	e.dev.WriteAt(data, 0)
	dir := t.TempDir()
	uris := []string{e.plainURI(), e.tlsURI(e.ca.TrustOnlyDir(t))}
	nbdcopy := testtool.Need(t, "nbdcopy")
	var wg sync.WaitGroup
	outs := make([][]byte, len(uris))
	errs := make([]error, len(uris))
	for i, uri := range uris {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = exec.Command(nbdcopy, uri, filepath.Join(dir, strconv.Itoa(i))).CombinedOutput()
		}()
	}
	wg.Wait()
	for i, uri := range uris {
		if errs[i] != nil {
			t.Fatalf("nbdcopy %s: %v\n%s", uri, errs[i], outs[i])
		}
		if b, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(i))); !bytes.Equal(b, data) {
			t.Errorf("nbdcopy %s read other data", uri)
		}
	}
	e.logged(t, "TLS 1.3", "no client certificate")
}

// TestTLSQemuIOVerify: qemu-io writes patterns through TLS and reads
// them back with verification, with a client certificate. (fio's nbd
// engine cannot present one: libnbd refuses its URI's tls-certificates=
// without nbd_set_uri_allow_local_file, which fio does not call.)
func TestTLSQemuIOVerify(t *testing.T) {
	e := serveTLS(t, TLSRequire, "", true, Config{})
	tlsArgs := e.qemuTLSArgs(e.ca.ClientDir(t, "qemu", e.ca)) // --object O --image-opts FILE
	args := tlsArgs[:3]
	want := make([]byte, e.dev.Size())
	for i := range 8 {
		off := i*(512<<10) + i*512 // unaligned, spanning sectors
		pat := 0x10 + i
		cmd := fmt.Sprintf("%d %d", off, 300<<10)
		args = append(args, "-c", fmt.Sprintf("write -P %d %s", pat, cmd), "-c", fmt.Sprintf("read -P %d %s", pat, cmd))
		copy(want[off:off+300<<10], bytes.Repeat([]byte{byte(pat)}, 300<<10))
	}
	out := testtool.Run(t, "qemu-io", append(args, tlsArgs[3])...)
	if strings.Contains(out, "verification failed") || strings.Count(out, "read 307200/307200") != 8 {
		t.Fatalf("qemu-io over TLS:\n%s", out)
	}
	got := make([]byte, len(want))
	e.dev.ReadAt(got, 0)
	if !bytes.Equal(got, want) {
		t.Fatal("the device does not hold what qemu-io wrote through TLS")
	}
	e.logged(t, "TLS 1.3", "client certificate CN=qemu")
}
