package nbd

import (
	"bufio"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode"
)

// Access says which client certificates may use which export, and how:
// the per-export policy of `luksd serve --tls-access FILE`. The file has
// one rule a line, "#" comments and blank lines aside:
//
//	EXPORT  ACCESS  CLIENT
//
// EXPORT is an export name or "*" for any; ACCESS is rw or ro; CLIENT,
// the rest of the line, is one of
//
//	subject=DN   the whole subject, RFC 2253 as `openssl x509 -noout
//	             -subject -nameopt RFC2253` prints it ("CN=alice,O=Example"):
//	             the last attribute first, openssl's names (DC,
//	             emailAddress, ...) and escapes; a malformed DN is an
//	             error
//	cn=NAME      the subject's common name
//	san=NAME     a DNS name, e-mail address or URI among the
//	             certificate's subject alternative names
//	*            any client with a verified certificate
//
// The first rule matching both the export and the client decides, as in
// qemu's authz-list; a client no rule matches, or one without a
// certificate, is refused.
type Access struct {
	rules []accessRule
}

type accessRule struct {
	export   string // "*": any
	readOnly bool
	kind     string // "subject", "cn", "san" or "*"
	value    string
}

// Grant is what an Access allows a client on an export.
type Grant int

const (
	// GrantNone refuses the client (NBD_REP_ERR_POLICY).
	GrantNone Grant = iota
	// GrantReadOnly shows the export read-only: writes, trims and write
	// zeroes fail with EPERM.
	GrantReadOnly
	// GrantReadWrite is full access.
	GrantReadWrite
)

// LoadAccessFile reads an access file (see Access).
func LoadAccessFile(path string) (*Access, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("access file: %w", err)
	}
	defer f.Close()
	a, err := ParseAccess(f)
	if err != nil {
		return nil, fmt.Errorf("access file %s: %w", path, err)
	}
	return a, nil
}

// ParseAccess reads access rules (see Access). An error names the line.
func ParseAccess(r io.Reader) (*Access, error) {
	a := &Access{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := trimBlanks(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		rule, err := parseAccessRule(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		a.rules = append(a.rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(a.rules) == 0 {
		return nil, fmt.Errorf("no rules (EXPORT rw|ro CLIENT)")
	}
	return a, nil
}

func parseAccessRule(line string) (accessRule, error) {
	export, rest := cutField(line)
	mode, client := cutField(rest)
	if client == "" {
		return accessRule{}, fmt.Errorf("want EXPORT rw|ro CLIENT, got %q", line)
	}
	rule := accessRule{export: export}
	switch mode {
	case "rw":
	case "ro":
		rule.readOnly = true
	default:
		return rule, fmt.Errorf("access %q is neither rw nor ro (want EXPORT rw|ro CLIENT)", mode)
	}
	if client == "*" {
		rule.kind = "*"
		return rule, nil
	}
	kind, value, ok := strings.Cut(client, "=")
	kind = strings.ToLower(strings.TrimSpace(kind))
	value = trimBlanks(value)
	if !ok || value == "" || !slices.Contains([]string{"subject", "cn", "san"}, kind) {
		return rule, fmt.Errorf("client %q is not subject=DN, cn=NAME, san=NAME or *", client)
	}
	if kind == "subject" {
		dn, err := canonicalDN(value)
		if err != nil {
			return rule, fmt.Errorf("subject=DN: %v", err)
		}
		value = dn
	}
	rule.kind, rule.value = kind, value
	return rule, nil
}

// Grant returns what the first rule matching export and cert allows;
// GrantNone when cert is nil or no rule matches.
func (a *Access) Grant(export string, cert *x509.Certificate) Grant {
	if cert == nil {
		return GrantNone
	}
	for _, r := range a.rules {
		if (r.export == "*" || r.export == export) && r.matches(cert) {
			if r.readOnly {
				return GrantReadOnly
			}
			return GrantReadWrite
		}
	}
	return GrantNone
}

func (r accessRule) matches(cert *x509.Certificate) bool {
	switch r.kind {
	case "*":
		return true
	case "subject":
		return certSubject(cert) == r.value
	case "cn":
		return cert.Subject.CommonName == r.value
	}
	if slices.Contains(cert.DNSNames, r.value) || slices.Contains(cert.EmailAddresses, r.value) {
		return true
	}
	return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == r.value })
}

// cutField splits s at its first run of blanks.
func cutField(s string) (field, rest string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], trimBlanks(s[i:])
}

// trimBlanks trims leading and trailing white space but keeps a blank
// escaped with a backslash, as a DN's trailing space is ("CN=a\ ").
func trimBlanks(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	t := strings.TrimRightFunc(s, unicode.IsSpace)
	if n := len(t) - len(strings.TrimRight(t, `\`)); n%2 == 1 && len(t) < len(s) {
		t = s[:len(t)+1]
	}
	return t
}

// errPolicy ends a handshake the access config refuses.
var errPolicy = errors.New("refused by the access config")

// grant is what the server's access config allows hc's client on the
// export (asked for by its name or as "", the default export).
func (s *Server) grant(hc *handshakeConn) Grant {
	if s.cfg.Access == nil {
		return GrantReadWrite
	}
	return s.cfg.Access.Grant(s.cfg.Name, hc.peerCert())
}

// refuseAccess answers NBD_OPT_INFO or NBD_OPT_GO for a client the
// access config refuses, and logs it. Under --tls=on a plaintext client
// is told the export needs TLS (NBD_REP_ERR_TLS_REQD, as the spec asks of
// a SELECTIVETLS server for a TLS-only export); a TLS client whose
// certificate no rule grants gets NBD_REP_ERR_POLICY.
func (s *Server) refuseAccess(hc *handshakeConn, opt uint32) error {
	if hc.tls == nil {
		s.logf("nbd: %s: %s (NBD_REP_ERR_TLS_REQD)", hc.who, s.refusal(hc))
		hc.refused++
		return writeOptError(hc.w, opt, repErrTLSReqd, "this export needs TLS with a client certificate")
	}
	s.logf("nbd: %s: %s (NBD_REP_ERR_POLICY)", hc.who, s.refusal(hc))
	return writeOptError(hc.w, opt, repErrPolicy, "access to this export is not allowed for this client")
}

// refusal says, for the log, which client was refused which export.
func (s *Server) refusal(hc *handshakeConn) string {
	who := "a client without a certificate"
	if c := hc.peerCert(); c != nil {
		who = "client certificate " + certSubject(c)
	}
	return fmt.Sprintf("%s may not use export %q", who, s.cfg.Name)
}
