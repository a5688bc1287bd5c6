package nbd

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// TLSCRLFile is a certificate directory's optional revocation list, read
// by nbdkit, qemu and libnbd alike: the certificates it lists are refused
// even though a CA in ca-cert.pem signed them.
const TLSCRLFile = "ca-crl.pem"

// revocations holds the certificates a ca-crl.pem revokes, by issuer and
// serial number.
type revocations map[revokedCert]bool

type revokedCert struct {
	issuer string // the issuer's DER-encoded name
	serial string // decimal
}

// loadCRL reads dir's ca-crl.pem, nil when there is none. Each CRL in it
// must be signed by one of cas, so that a stray file cannot pass for the
// CA's word.
func loadCRL(dir string, cas []*x509.Certificate) (revocations, error) {
	file := filepath.Join(dir, TLSCRLFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rev := revocations{}
	ders := pemBlocks(data, "X509 CRL")
	for _, der := range ders {
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !signedByOneOf(crl, cas) {
			return nil, fmt.Errorf("%s: a CRL not signed by a CA of %s", file, TLSCACertFile)
		}
		for _, e := range crl.RevokedCertificateEntries {
			rev[revokedCert{string(crl.RawIssuer), e.SerialNumber.String()}] = true
		}
	}
	if len(ders) == 0 {
		return nil, errors.New(file + ": no PEM CRL in it")
	}
	return rev, nil
}

func signedByOneOf(crl *x509.RevocationList, cas []*x509.Certificate) bool {
	for _, ca := range cas {
		if crl.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// check refuses a peer whose verified chains hold a revoked certificate.
func (r revocations) check(chains [][]*x509.Certificate) error {
	for _, chain := range chains {
		for _, c := range chain {
			if r[revokedCert{string(c.RawIssuer), c.SerialNumber.String()}] {
				return fmt.Errorf("certificate %s (serial %x) is revoked by %s", certSubject(c), c.SerialNumber, TLSCRLFile)
			}
		}
	}
	return nil
}
