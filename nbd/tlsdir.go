package nbd

import (
	"crypto/tls"
	"crypto/x509"
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
// requires; without it no client certificate is asked for, and
// ca-cert.pem may be absent.
//
// The NBD protocol requires TLS 1.2 and recommends later versions: the
// config accepts 1.2 and 1.3, and crypto/tls picks 1.3 with every client
// that offers it.
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
	pool, err := loadCAPool(dir)
	if err != nil {
		return nil, fmt.Errorf("TLS client verification needs %w", err)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return cfg, nil
}

// loadCAPool reads the CA certificates of ca-cert.pem in dir, which check
// the peer: a server's clients (LoadTLSDir) or a client's server
// (Target.clientTLS).
func loadCAPool(dir string) (*x509.CertPool, error) {
	caFile := filepath.Join(dir, TLSCACertFile)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(caFile + ": no PEM certificate in it")
	}
	return pool, nil
}
