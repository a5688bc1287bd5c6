package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// An nbds:// location whose tls-certificates= directory cannot be read
// says so, naming the directory, in one line (exit 1, as serve's
// --tls-certificates): a missing directory, one without ca-cert.pem, a
// file, one whose client certificate has no key. A readable directory
// lets the failure be the server's.
func TestNBDSCertDirUnreadable(t *testing.T) {
	addr := testtool.FreeLoopbackPort(t)
	uri := func(dir string) string { return "nbds://" + addr + "/?tls-certificates=" + dir }
	ca := testtool.NewCA(t, "luksd test CA")
	noKey := ca.ClientDir(t, "alice", ca)
	if err := os.Remove(filepath.Join(noKey, "client-key.pem")); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	file := testtool.KeyFile(t, []byte("not a directory"))
	for _, dir := range []string{missing, t.TempDir(), file, noKey} {
		luksd(t, nil, "luksDump", uri(dir)).expect(t, exitParams, "Cannot read the TLS certificate directory "+dir+": ")
	}
	luksd(t, nil, "copy", "-q", file, uri(missing)).expect(t, exitParams, "Cannot read the TLS certificate directory "+missing+": ")

	r := luksd(t, nil, "luksDump", uri(ca.TrustOnlyDir(t)))
	if r.code != exitDevice || strings.Contains(r.stderr, "certificate directory") {
		t.Fatalf("nothing listening, a readable directory: exit %d, %q", r.code, r.stderr)
	}
}
