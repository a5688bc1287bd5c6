package nbd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The files of a libnbd client certificate directory (tls-certificates=):
// ca-cert.pem checks the server, client-cert.pem and client-key.pem, when
// there, identify the client.
const (
	TLSClientCertFile = "client-cert.pem"
	TLSClientKeyFile  = "client-key.pem"
)

// defaultPort is the NBD port IANA assigned.
const defaultPort = "10809"

// Target is where an NBD URI points, as libnbd reads nbd://HOST[:PORT]/EXPORT,
// nbds://... and nbd+unix:///EXPORT?socket=PATH (nbds+unix likewise).
type Target struct {
	Network string // "tcp" or "unix"
	Addr    string // host:port or a socket path
	Export  string
	// TLS: the scheme is nbds or nbds+unix; STARTTLS is required.
	TLS bool
	// CertDir is the tls-certificates= directory, "" for none (the
	// system's CAs then check the server, and no client certificate).
	CertDir string
	// NoVerifyPeer is libnbd's tls-verify-peer=false: the server's
	// certificate is not checked at all (the session is still encrypted).
	NoVerifyPeer bool
	host         string // the name the server's certificate must carry
}

// ParseURI reads an NBD URI. Query parameters other than socket=,
// tls-certificates= and tls-verify-peer= are refused, so that a typo is not
// silently ignored.
func ParseURI(uri string) (Target, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Target{}, fmt.Errorf("NBD URI: %w", err)
	}
	var t Target
	unixSock := false
	switch u.Scheme {
	case "nbd":
	case "nbds":
		t.TLS = true
	case "nbd+unix":
		unixSock = true
	case "nbds+unix":
		t.TLS, unixSock = true, true
	default:
		return Target{}, fmt.Errorf("NBD URI %s: scheme %q is not nbd, nbds, nbd+unix or nbds+unix", uri, u.Scheme)
	}
	if u.User != nil || u.Fragment != "" {
		return Target{}, fmt.Errorf("NBD URI %s: user names and fragments are not supported", uri)
	}
	// libnbd: the path is "/" followed by the export name.
	t.Export = strings.TrimPrefix(u.Path, "/")
	q := u.Query()
	for k := range q {
		switch k {
		case "socket", "tls-certificates", "tls-verify-peer":
		case "tls-psk-file", "tls-username":
			return Target{}, fmt.Errorf("NBD URI %s: TLS with pre-shared keys (%s=) is not supported: use certificates", uri, k)
		default:
			return Target{}, fmt.Errorf("NBD URI %s: unsupported query parameter %q", uri, k)
		}
	}
	t.CertDir = q.Get("tls-certificates")
	if q.Has("tls-verify-peer") {
		verify, err := parseURIBool(q.Get("tls-verify-peer"))
		if err != nil {
			return Target{}, fmt.Errorf("NBD URI %s: tls-verify-peer=: %w", uri, err)
		}
		t.NoVerifyPeer = !verify
	}
	if (t.CertDir != "" || q.Has("tls-verify-peer")) && !t.TLS {
		return Target{}, fmt.Errorf("NBD URI %s: tls-certificates= and tls-verify-peer= need nbds:// or nbds+unix://", uri)
	}
	if unixSock {
		t.Network, t.Addr = "unix", q.Get("socket")
		if t.Addr == "" || u.Host != "" {
			return Target{}, fmt.Errorf("NBD URI %s: a unix URI needs ?socket=PATH and no host", uri)
		}
		t.host = "localhost"
		return t, nil
	}
	if q.Has("socket") {
		return Target{}, fmt.Errorf("NBD URI %s: socket= needs nbd+unix:// or nbds+unix://", uri)
	}
	t.host = u.Hostname()
	if t.host == "" {
		return Target{}, fmt.Errorf("NBD URI %s: no host", uri)
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	t.Network, t.Addr = "tcp", net.JoinHostPort(t.host, port)
	return t, nil
}

// parseURIBool reads a boolean as libnbd's URI parser does.
func parseURIBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

// clientTLS builds the TLS configuration of a target: the server is
// checked against ca-cert.pem in CertDir (or the system's CAs without a
// directory; not at all with NoVerifyPeer, when ca-cert.pem may be
// absent), and client-cert.pem with client-key.pem are presented when the
// directory has them.
func (t Target) clientTLS() (*tls.Config, error) {
	cfg := &tls.Config{
		ServerName:         t.host,
		MinVersion:         tls.VersionTLS12, // as the NBD protocol requires
		InsecureSkipVerify: t.NoVerifyPeer,
	}
	if t.CertDir == "" {
		return cfg, nil
	}
	trust, err := loadTrust(t.CertDir)
	switch {
	case err == nil:
	case t.NoVerifyPeer && errors.Is(err, os.ErrNotExist):
		// Nothing to check the server with, and nothing asked to.
	default:
		return nil, fmt.Errorf("TLS certificates: %w", err)
	}
	cfg.RootCAs = trust.pool
	cfg.VerifyConnection = trust.verifyConnection()
	certFile := filepath.Join(t.CertDir, TLSClientCertFile)
	keyFile := filepath.Join(t.CertDir, TLSClientKeyFile)
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS client certificate in %s: %w", t.CertDir, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}
