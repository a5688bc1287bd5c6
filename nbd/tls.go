package nbd

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// TLSMode is how a server treats NBD_OPT_STARTTLS, in the protocol's terms.
type TLSMode int

const (
	// TLSOff is NOTLS: STARTTLS is answered NBD_REP_ERR_UNSUP.
	TLSOff TLSMode = iota
	// TLSOn is SELECTIVETLS with no TLS-only export: a client may upgrade
	// and a plaintext client is served too.
	TLSOn
	// TLSRequire is FORCEDTLS: before the upgrade every option but
	// STARTTLS and ABORT is answered NBD_REP_ERR_TLS_REQD, and
	// NBD_OPT_EXPORT_NAME (which cannot be answered with an error) ends
	// the connection.
	TLSRequire
)

// ParseTLSMode reads nbdkit's --tls values: off, on or require (and
// no/false, yes/true as synonyms).
func ParseTLSMode(s string) (TLSMode, error) {
	switch strings.ToLower(s) {
	case "off", "no", "false":
		return TLSOff, nil
	case "on", "yes", "true":
		return TLSOn, nil
	case "require", "required", "force":
		return TLSRequire, nil
	}
	return TLSOff, fmt.Errorf("bad TLS mode %q (off, on or require)", s)
}

func (m TLSMode) String() string {
	switch m {
	case TLSOn:
		return "on"
	case TLSRequire:
		return "require"
	}
	return "off"
}

const repErrTLSReqd = 1<<31 + 5 // NBD_REP_ERR_TLS_REQD

// handshakeConn is one connection during option haggling; STARTTLS swaps
// its reader, writer and conn for the TLS ones.
type handshakeConn struct {
	conn net.Conn // nil on plain streams (fuzzing): no upgrade possible
	r    *bufio.Reader
	w    io.Writer
	who  string // the connection, for the log
	// tls is the upgraded connection, nil before STARTTLS.
	tls *tls.Conn
	// refused counts options answered NBD_REP_ERR_TLS_REQD, for the log.
	refused int
}

// errTLSRequired ends a plaintext client's handshake under TLSRequire.
var errTLSRequired = errors.New("client did not start TLS, which the server requires")

// explain says, when a handshake ends after options were refused for want
// of TLS, that this is why: the client left (or aborted) because it was
// refused, which the log should tell.
func (hc *handshakeConn) explain(err error) error {
	if err == nil || hc.refused == 0 || errors.Is(err, errTLSRequired) {
		return err
	}
	return fmt.Errorf("%w (%d options refused), then: %v", errTLSRequired, hc.refused, err)
}

// tlsRequired reports whether opt must be refused for want of TLS.
func (s *Server) tlsRequired(hc *handshakeConn, opt uint32) bool {
	return s.cfg.TLSMode == TLSRequire && hc.tls == nil && opt != optStartTLS && opt != optAbort
}

// refuseBeforeTLS answers an option sent before the upgrade a
// TLSRequire server insists on. NBD_OPT_EXPORT_NAME cannot be answered
// with an error: the connection ends.
func (s *Server) refuseBeforeTLS(hc *handshakeConn, opt uint32) error {
	if opt == optExportName {
		return fmt.Errorf("NBD_OPT_EXPORT_NAME without TLS: %w", errTLSRequired)
	}
	hc.refused++
	return writeOptError(hc.w, opt, repErrTLSReqd, "TLS is required: send NBD_OPT_STARTTLS first")
}

// startTLS answers NBD_OPT_STARTTLS: an error reply the client may go on
// after, or NBD_REP_ACK and the TLS handshake, after which hc reads and
// writes through TLS. A failed TLS handshake ends the connection (the
// protocol leaves no way back to plaintext).
func (s *Server) startTLS(hc *handshakeConn, data []byte, res *handshakeResult) error {
	switch {
	case s.cfg.TLSMode == TLSOff || s.cfg.TLS == nil:
		return writeOptError(hc.w, optStartTLS, repErrUnsup, "TLS is not enabled on this server")
	case hc.tls != nil:
		return writeOptError(hc.w, optStartTLS, repErrInvalid, "TLS is already on")
	case len(data) != 0:
		return writeOptError(hc.w, optStartTLS, repErrInvalid, "NBD_OPT_STARTTLS takes no data")
	case hc.conn == nil:
		return writeOptError(hc.w, optStartTLS, repErrUnsup, "this connection cannot carry TLS")
	}
	// A client must wait for the reply before it sends anything more.
	// Bytes already here were sent in plaintext: they must not be taken
	// as if they came through TLS (the STARTTLS injection attacks).
	if n := hc.r.Buffered(); n > 0 {
		return fmt.Errorf("%d plaintext bytes sent after NBD_OPT_STARTTLS before its reply", n)
	}
	if err := writeOptReply(hc.w, optStartTLS, repAck, nil); err != nil {
		return err
	}
	// Under TLS, replies are sealed into full records and corked into
	// large socket writes (tls_writer.go).
	tc := tls.Server(&corkedConn{Conn: hc.conn}, s.cfg.TLS)
	// The connection's handshake deadline bounds the TLS handshake too.
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w%s", err, noClientCertHint(err))
	}
	hc.tls = tc
	hc.conn = tc
	hc.r.Reset(tc)
	hc.w = tc
	// Nothing agreed in plaintext carries over into the TLS session.
	*res = handshakeResult{}
	s.logf("nbd: %s: %s", hc.who, describeTLS(tc.ConnectionState()))
	return nil
}

// noClientCertHint explains a client that sent no certificate when one was
// required: often a GnuTLS client holding an RSA key (tls_gnutls.go).
// crypto/tls exports no error value for it, only this text.
func noClientCertHint(err error) string {
	if !strings.Contains(err.Error(), "client didn't provide a certificate") {
		return ""
	}
	return " (GnuTLS clients, such as libnbd's and qemu's, send no RSA client certificate over TLS 1.3 unless the CA's key is RSA too: use an RSA CA, or ECDSA client keys)"
}

// describeTLS says what a TLS session settled, and who the client is.
func describeTLS(cs tls.ConnectionState) string {
	who := "no client certificate"
	if len(cs.PeerCertificates) > 0 {
		who = "client certificate " + clientSubject(cs)
	}
	return fmt.Sprintf("%s %s, %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), who)
}

// clientSubject is the verified client certificate's subject as openssl
// prints it with -nameopt RFC2253 ("CN=alice,O=Example", see
// certSubject), or "" when there is none.
func clientSubject(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return certSubject(cs.PeerCertificates[0])
}

// rawConn is the socket under a TLS connection, or c itself.
func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*corkedConn); ok {
		return cc.Conn
	}
	return c
}

// peerCert is the client's verified certificate, nil before STARTTLS or
// when it sent none.
func (hc *handshakeConn) peerCert() *x509.Certificate {
	if hc.tls == nil {
		return nil
	}
	if pc := hc.tls.ConnectionState().PeerCertificates; len(pc) > 0 {
		return pc[0]
	}
	return nil
}
