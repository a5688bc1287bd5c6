package nbd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The files of a TLS certificate directory, named as nbdkit and qemu-nbd
// name them (libnbd's and qemu's client directories hold ca-cert.pem,
// client-cert.pem and client-key.pem).
const (
	TLSCACertFile     = "ca-cert.pem"
	TLSServerCertFile = "server-cert.pem"
	TLSServerKeyFile  = "server-key.pem"
)

// LoadTLSDir reads a server's certificate directory: server-cert.pem (the
// server's certificate, then any intermediates) and server-key.pem (its
// key, PKCS#1, PKCS#8 or SEC 1). With verifyPeer, a client must present a
// certificate signed by a CA in ca-cert.pem, as nbdkit's --tls-verify-peer
// requires, and one that ca-crl.pem (when there) revokes is refused;
// without it no client certificate is asked for, and ca-cert.pem may be
// absent.
//
// The NBD protocol requires TLS 1.2 and recommends later versions: the
// config accepts 1.2 and 1.3, and crypto/tls picks 1.3 with every client
// that offers it, but for GnuTLS's clients of an RSA CA (tls_gnutls.go).
func LoadTLSDir(dir string, verifyPeer bool) (*tls.Config, error) {
	certFile := filepath.Join(dir, TLSServerCertFile)
	keyFile := filepath.Join(dir, TLSServerKeyFile)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificates in %s: %w", dir, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		ClientAuth:   tls.NoClientCert,
		// Replies are bulk data: full-size records from the start.
		DynamicRecordSizingDisabled: true,
	}
	if !verifyPeer {
		return cfg, nil
	}
	trust, err := loadTrust(dir)
	if err != nil {
		return nil, fmt.Errorf("TLS client verification needs %w", err)
	}
	cfg.ClientCAs = trust.pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.VerifyConnection = trust.verifyConnection()
	if trust.hasRSA() {
		offerGnuTLSVersion12(cfg)
	}
	return cfg, nil
}

// caTrust is what a certificate directory says about peers: the CAs of
// ca-cert.pem that must have signed them, and the certificates ca-crl.pem
// revokes.
type caTrust struct {
	pool    *x509.CertPool
	cas     []*x509.Certificate
	revoked revocations
}

// loadTrust reads dir's ca-cert.pem and, when there, its ca-crl.pem. It
// checks the peer: a server's clients (LoadTLSDir) or a client's server
// (Target.clientTLS).
func loadTrust(dir string) (caTrust, error) {
	caFile := filepath.Join(dir, TLSCACertFile)
	data, err := os.ReadFile(caFile)
	if err != nil {
		return caTrust{}, fmt.Errorf("%s: %w", caFile, err)
	}
	t := caTrust{pool: x509.NewCertPool()}
	for _, der := range pemBlocks(data, "CERTIFICATE") {
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			return caTrust{}, fmt.Errorf("%s: %w", caFile, err)
		}
		t.pool.AddCert(ca)
		t.cas = append(t.cas, ca)
	}
	if len(t.cas) == 0 {
		return caTrust{}, errors.New(caFile + ": no PEM certificate in it")
	}
	if t.revoked, err = loadCRL(dir, t.cas); err != nil {
		return caTrust{}, err
	}
	return t, nil
}

// verifyConnection refuses a peer that ca-crl.pem revokes (nil, checking
// nothing more than crypto/tls does, without a CRL).
func (t caTrust) verifyConnection() func(tls.ConnectionState) error {
	if t.revoked == nil {
		return nil
	}
	return func(cs tls.ConnectionState) error { return t.revoked.check(cs.VerifiedChains) }
}

// hasRSA reports whether a CA's key is RSA.
func (t caTrust) hasRSA() bool {
	for _, ca := range t.cas {
		if ca.PublicKeyAlgorithm == x509.RSA {
			return true
		}
	}
	return false
}

// pemBlocks are the contents of data's PEM blocks of type typ.
func pemBlocks(data []byte, typ string) [][]byte {
	var ders [][]byte
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return ders
		}
		if b.Type == typ {
			ders = append(ders, b.Bytes)
		}
	}
}
