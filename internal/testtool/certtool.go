package testtool

import (
	"os"
	"path/filepath"
	"testing"
)

// CerttoolPKI is a CA made with GnuTLS's certtool as nbdkit-tls(1) tells
// its users to make one: every key certtool's default, RSA. ServerDir
// holds what `luksd serve --tls-certificates` and nbdkit read.
type CerttoolPKI struct {
	t         testing.TB
	work      string
	ServerDir string
}

// NewCerttoolPKI makes the CA and a server directory for 127.0.0.1 and
// localhost.
func NewCerttoolPKI(t testing.TB) *CerttoolPKI {
	t.Helper()
	Need(t, "certtool")
	p := &CerttoolPKI{t: t, work: t.TempDir(), ServerDir: t.TempDir()}
	p.certtool("--generate-privkey", "--outfile", p.path("ca-key.pem"))
	p.template("ca.tmpl", "cn = certtool test CA\nca\ncert_signing_key\ncrl_signing_key\nexpiration_days = 2\n")
	p.certtool("--generate-self-signed", "--load-privkey", p.path("ca-key.pem"),
		"--template", p.path("ca.tmpl"), "--outfile", p.path("ca-cert.pem"))
	p.leaf(p.ServerDir, "server", "cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\n"+
		"tls_www_server\nsigning_key\nencryption_key\nexpiration_days = 2\n")
	return p
}

// ClientDir makes a client directory (libnbd's tls-certificates=, qemu's
// tls-creds-x509) whose certificate has common name cn.
func (p *CerttoolPKI) ClientDir(cn string) string {
	p.t.Helper()
	dir := p.t.TempDir()
	p.leaf(dir, "client", "cn = "+cn+"\ntls_www_client\nsigning_key\nexpiration_days = 2\n")
	return dir
}

// Revoke writes ca-crl.pem into dir (a server or client directory),
// signed by the CA and revoking the given certificate files.
func (p *CerttoolPKI) Revoke(dir string, certFiles ...string) {
	p.t.Helper()
	var certs []byte
	for _, f := range certFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			p.t.Fatal(err)
		}
		certs = append(certs, b...)
	}
	writeFile(p.t, p.path("revoked.pem"), certs)
	p.template("crl.tmpl", "crl_next_update = 2\ncrl_number = 1\n")
	p.certtool("--generate-crl", "--load-ca-privkey", p.path("ca-key.pem"),
		"--load-ca-certificate", p.path("ca-cert.pem"), "--load-certificate", p.path("revoked.pem"),
		"--template", p.path("crl.tmpl"), "--outfile", filepath.Join(dir, "ca-crl.pem"))
}

// leaf makes role-key.pem and role-cert.pem (signed by the CA) in dir,
// beside the CA's certificate.
func (p *CerttoolPKI) leaf(dir, role, tmpl string) {
	p.t.Helper()
	key, cert := filepath.Join(dir, role+"-key.pem"), filepath.Join(dir, role+"-cert.pem")
	p.certtool("--generate-privkey", "--outfile", key)
	p.template(role+".tmpl", tmpl)
	p.certtool("--generate-certificate", "--load-privkey", key, "--load-ca-certificate", p.path("ca-cert.pem"),
		"--load-ca-privkey", p.path("ca-key.pem"), "--template", p.path(role+".tmpl"), "--outfile", cert)
	b, err := os.ReadFile(p.path("ca-cert.pem"))
	if err != nil {
		p.t.Fatal(err)
	}
	writeFile(p.t, filepath.Join(dir, "ca-cert.pem"), b)
}

func (p *CerttoolPKI) certtool(args ...string) {
	p.t.Helper()
	Run(p.t, "certtool", args...)
}

func (p *CerttoolPKI) template(name, text string) { writeFile(p.t, p.path(name), []byte(text)) }

func (p *CerttoolPKI) path(name string) string { return filepath.Join(p.work, name) }
