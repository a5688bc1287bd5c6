package testtool

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for TLS tests. Its directories use the
// file names NBD peers read: a server directory (nbdkit, luksd serve)
// holds ca-cert.pem, server-cert.pem and server-key.pem; a client
// directory (libnbd's tls-certificates=, qemu's tls-creds-x509)
// ca-cert.pem, client-cert.pem and client-key.pem.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	CertPEM []byte
}

// NewCA makes a self-signed CA named cn with crypto/x509.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"luksd tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, CertPEM: pemBlock("CERTIFICATE", der)}
}

// ServerDir writes a server directory: a certificate for 127.0.0.1, ::1
// and localhost signed by ca, and ca's certificate.
func (ca *CA) ServerDir(t testing.TB) string {
	t.Helper()
	tmpl := ca.leaf(t, "luksd test server", x509.ExtKeyUsageServerAuth)
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	return ca.writeDir(t, tmpl, "server", ca)
}

// ClientDir writes a client directory: a certificate with common name cn
// signed by ca, and trusted's certificate to check the server with
// (normally ca itself).
func (ca *CA) ClientDir(t testing.TB, cn string, trusted *CA) string {
	t.Helper()
	return ca.writeDir(t, ca.leaf(t, cn, x509.ExtKeyUsageClientAuth), "client", trusted)
}

// TrustOnlyDir writes a client directory with ca's certificate and no
// client certificate.
func (ca *CA) TrustOnlyDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca-cert.pem"), ca.CertPEM)
	return dir
}

func (ca *CA) leaf(t testing.TB, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"luksd tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

// writeDir signs tmpl and writes ROLE-cert.pem, ROLE-key.pem and
// trusted's ca-cert.pem into a fresh directory.
func (ca *CA) writeDir(t testing.TB, tmpl *x509.Certificate, role string, trusted *CA) string {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca-cert.pem"), trusted.CertPEM)
	writeFile(t, filepath.Join(dir, role+"-cert.pem"), pemBlock("CERTIFICATE", der))
	writeFile(t, filepath.Join(dir, role+"-key.pem"), pemBlock("PRIVATE KEY", pkcs8))
	return dir
}

// OpenSSLDirs makes a CA, a server directory and a client directory (its
// certificate's common name cn) with the openssl command: ECDSA P-256
// keys in openssl's own formats. (Not RSA: over TLS 1.3, GnuTLS 3.7
// clients, libnbd's and qemu's, send no RSA client certificate to a
// crypto/tls server, which then refuses them; over TLS 1.2 they do.)
func OpenSSLDirs(t testing.TB, cn string) (serverDir, clientDir string) {
	t.Helper()
	serverDir, clients := OpenSSLClients(t, cn)
	return serverDir, clients[0]
}

// OpenSSLClients is OpenSSLDirs with one client directory for each of
// cns, all signed by the one CA.
func OpenSSLClients(t testing.TB, cns ...string) (serverDir string, clientDirs []string) {
	t.Helper()
	work := t.TempDir()
	serverDir = t.TempDir()
	p := func(name string) string { return filepath.Join(work, name) }
	newKey := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	Run(t, "openssl", append(append([]string{"req", "-x509"}, newKey...), "-days", "2",
		"-subj", "/O=luksd tests/CN=openssl test CA", "-keyout", p("ca-key.pem"), "-out", p("ca-cert.pem"))...)
	writeFile(t, p("server.ext"), []byte("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"))
	writeFile(t, p("client.ext"), []byte("extendedKeyUsage=clientAuth\n"))
	type leaf struct{ role, subj, dir string }
	leaves := []leaf{{"server", "/O=luksd tests/CN=localhost", serverDir}}
	for _, cn := range cns {
		dir := t.TempDir()
		clientDirs = append(clientDirs, dir)
		leaves = append(leaves, leaf{"client", "/O=luksd tests/CN=" + cn, dir})
	}
	for _, leaf := range leaves {
		key, csr, cert := p(leaf.role+"-key.pem"), p(leaf.role+".csr"), p(leaf.role+"-cert.pem")
		Run(t, "openssl", append(append([]string{"req"}, newKey...), "-subj", leaf.subj, "-keyout", key, "-out", csr)...)
		Run(t, "openssl", "x509", "-req", "-in", csr, "-CA", p("ca-cert.pem"), "-CAkey", p("ca-key.pem"),
			"-CAcreateserial", "-days", "2", "-extfile", p(leaf.role+".ext"), "-out", cert)
		for _, f := range []string{"ca-cert.pem", leaf.role + "-key.pem", leaf.role + "-cert.pem"} {
			b, err := os.ReadFile(p(f))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(leaf.dir, f), b)
		}
	}
	return serverDir, clientDirs
}

func newKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
