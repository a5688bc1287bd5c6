package nbd

import (
	"crypto/tls"
	"slices"
)

// GnuTLS 3.7's clients (libnbd's, qemu's, nbd-client's) send no RSA client
// certificate to a crypto/tls server over TLS 1.3. GnuTLS picks a client
// certificate by the key types of the signature schemes in the server's
// CertificateRequest; an RSA key may only sign with RSA-PSS in TLS 1.3, and
// GnuTLS files those schemes under RSA-PSS keys, so a plain RSA key never
// matches. GnuTLS and OpenSSL servers list PKCS#1 schemes there as well
// (for certificate signatures), which is why nbdkit and qemu-nbd get the
// certificate; crypto/tls lists only what TLS 1.3 allows and has no knob
// for it. Over TLS 1.2 the same clients do send it.
//
// So when the CA that checks clients has an RSA key, as certtool and
// openssl make CAs and client keys by default, a client whose ClientHello
// is GnuTLS's is offered TLS 1.2 at most (ECDHE with AES-GCM or
// ChaCha20-Poly1305: forward secrecy and AEAD all the same). Clients of an
// ECDSA or Ed25519 CA, and every other TLS stack, get TLS 1.3.
func offerGnuTLSVersion12(cfg *tls.Config) {
	tls12 := cfg.Clone()
	tls12.MaxVersion = tls.VersionTLS12
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if gnutlsHello(hello) && slices.Contains(hello.SupportedVersions, tls.VersionTLS12) {
			return tls12, nil
		}
		return nil, nil
	}
}

// gnutlsHello reports whether a ClientHello lists its signature schemes in
// GnuTLS's order: rsa_pkcs1_sha256, then rsa_pss_pss_sha256. OpenSSL, NSS
// and Go put ECDSA or RSA-PSS first, none PKCS#1.
func gnutlsHello(hello *tls.ClientHelloInfo) bool {
	const pssPSSWithSHA256 tls.SignatureScheme = 0x0809 // unnamed in crypto/tls
	s := hello.SignatureSchemes
	return len(s) >= 2 && s[0] == tls.PKCS1WithSHA256 && s[1] == pssPSSWithSHA256
}
