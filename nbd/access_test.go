package nbd

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

func TestParseAccess(t *testing.T) {
	a, err := ParseAccess(strings.NewReader(`# export access client
vol   rw  cn=alice
vol	ro	subject=CN=bob,O=Example Org
*     ro  san=backup.example.org
other rw  *
`))
	if err != nil {
		t.Fatal(err)
	}
	cert := func(cn, org string, dns ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: []string{org}}, DNSNames: dns}
		return c
	}
	u, _ := url.Parse("spiffe://example.org/carol")
	for _, tc := range []struct {
		export string
		cert   *x509.Certificate
		want   Grant
	}{
		{"vol", cert("alice", "X"), GrantReadWrite},
		{"vol", cert("bob", "Example Org"), GrantReadOnly},
		{"vol", cert("bob", "Other"), GrantNone}, // the whole subject must match
		{"vol", cert("eve", "X", "backup.example.org"), GrantReadOnly},
		{"any", cert("eve", "X", "backup.example.org"), GrantReadOnly},
		{"any", cert("alice", "X"), GrantNone},
		{"other", cert("anyone", "X"), GrantReadWrite},
		{"vol", &x509.Certificate{URIs: []*url.URL{u}}, GrantNone},
		{"vol", nil, GrantNone},
	} {
		if got := a.Grant(tc.export, tc.cert); got != tc.want {
			t.Errorf("Grant(%q, %v) = %d, want %d", tc.export, tc.cert, got, tc.want)
		}
	}
	// The first matching line decides.
	a, _ = ParseAccess(strings.NewReader("vol ro cn=alice\nvol rw cn=alice\nvol rw san=spiffe://example.org/carol\n"))
	if g := a.Grant("vol", cert("alice", "X")); g != GrantReadOnly {
		t.Errorf("first rule did not decide: %d", g)
	}
	if g := a.Grant("vol", &x509.Certificate{URIs: []*url.URL{u}}); g != GrantReadWrite {
		t.Errorf("URI SAN: %d", g)
	}
}

func TestParseAccessErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"", "no rules"},
		{"# only a comment\n\n", "no rules"},
		{"vol rw", "line 1: want EXPORT rw|ro CLIENT"},
		{"\nvol rx cn=alice", "line 2: access \"rx\" is neither rw nor ro"},
		{"vol rw alice", "line 1: client \"alice\" is not subject=DN"},
		{"vol rw cn=", "is not subject=DN"},
		{"vol rw uid=alice", "is not subject=DN"},
		{"vol rw subject=CN=a,,=", `line 1: subject=DN: "CN=a,,=": unknown attribute type ","`},
		{"vol rw subject=CN=a,", "want TYPE=VALUE"},
		{"vol rw subject=cn=alice", `unknown attribute type "cn"`},
		{"vol rw subject=commonName=alice", "unknown attribute type"},
		{"vol rw subject=CN=a;b", "must be escaped"},
		{`vol rw subject=CN=a\`, "bad escape"},
		{`vol rw subject=CN=a\x`, "bad escape"},
		{"vol rw subject=CN=#12G", "want , or +"},
		{"vol rw subject=CN=#123", "even number of hex digits"},
	} {
		_, err := ParseAccess(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.msg)
		}
	}
}

// TestAccessRefusal walks the protocol: a refused client's NBD_OPT_INFO
// and NBD_OPT_GO get NBD_REP_ERR_POLICY (and it may go on), its
// NBD_OPT_EXPORT_NAME ends the connection; a read-only client sees
// NBD_FLAG_READ_ONLY and its writes and trims fail with EPERM; each
// refusal is logged with the subject and export.
func TestAccessRefusal(t *testing.T) {
	access, err := ParseAccess(strings.NewReader("vol rw cn=alice\nvol ro cn=bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := serveTLS(t, TLSRequire, "", true, Config{Name: "vol", Access: access})
	dial := func(cn string) *rawClient {
		c := dialRawNet(t, "tcp", e.addr)
		c.greet(t, flagCFixedNew|flagCNoZeroes)
		if err := c.startTLS(t, clientTLS(t, e.ca.ClientDir(t, cn, e.ca))); err != nil {
			t.Fatal(err)
		}
		return c
	}
	goFlags := func(c *rawClient, name string) (uint32, uint16) {
		types, payloads := c.option(t, optGo, goData(name))
		for i, p := range payloads {
			if types[i] == repInfo && binary.BigEndian.Uint16(p) == infoExport {
				c.flags = binary.BigEndian.Uint16(p[10:])
			}
		}
		return types[len(types)-1], c.flags
	}

	carol := dial("carol")
	for _, opt := range []uint32{optInfo, optGo} {
		if types, _ := carol.option(t, opt, goData("vol")); types[0] != repErrPolicy {
			t.Errorf("option %d for a refused client: %#x", opt, types)
		}
	}
	e.logged(t, "CN=carol", `export "vol"`, "NBD_REP_ERR_POLICY")
	carol.send(t, optionBytes(optExportName, []byte("")))
	if !carol.closed(t) {
		t.Error("NBD_OPT_EXPORT_NAME of a refused client did not end the connection")
	}
	e.logged(t, "handshake failed", "refused by the access config", "CN=carol")

	bob := dial("bob")
	if final, flags := goFlags(bob, ""); final != repAck || flags&FlagReadOnly == 0 || flags&(FlagSendTrim|FlagSendWriteZeroes|FlagSendFUA) != 0 {
		t.Fatalf("read-only client: reply %#x, flags %#x", final, flags)
	}
	if code := bob.write(t, 0, []byte("bob"), 0); code != errPerm {
		t.Errorf("read-only client's write: %d, want EPERM", code)
	}
	if code := bob.cmd(t, cmdTrim, 0, 0, 4096); code != errPerm {
		t.Errorf("read-only client's trim: %d, want EPERM", code)
	}

	alice := dial("alice")
	if final, flags := goFlags(alice, "vol"); final != repAck || flags&FlagReadOnly != 0 {
		t.Fatalf("read-write client: reply %#x, flags %#x", final, flags)
	}
	if code := alice.write(t, 0, []byte("alice"), 0); code != 0 {
		t.Errorf("read-write client's write: %d", code)
	}
	if b, code := bob.read(t, 0, 5); code != 0 || string(b) != "alice" {
		t.Errorf("read-only client reads %q %d", b, code)
	}
}

// TestAccessPlaintextUnderTLSOn: with --tls=on and an access config, a
// plaintext client is told the export needs TLS (NBD_REP_ERR_TLS_REQD),
// and may then upgrade and get in.
func TestAccessPlaintextUnderTLSOn(t *testing.T) {
	access, err := ParseAccess(strings.NewReader("* rw cn=alice\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := serveTLS(t, TLSOn, "", true, Config{Access: access})
	c := dialRawNet(t, "tcp", e.addr)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	if types, _ := c.option(t, optGo, goData("")); types[0] != repErrTLSReqd {
		t.Fatalf("plaintext NBD_OPT_GO under an access config: %#x", types)
	}
	e.logged(t, "a client without a certificate", "NBD_REP_ERR_TLS_REQD")
	if err := c.startTLS(t, clientTLS(t, e.ca.ClientDir(t, "alice", e.ca))); err != nil {
		t.Fatal(err)
	}
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("after STARTTLS: %#x", types)
	}
}

// FuzzParseAccess: any file is a clean error or rules that answer Grant.
func FuzzParseAccess(f *testing.F) {
	f.Add("vol rw cn=alice\n* ro subject=CN=bob,O=X\n")
	f.Add("\t*\tro\t*\n# c\n")
	f.Add("vol rx san=")
	f.Add(`vol rw subject=CN=a\ ,O=\#x\C3\A9+UID=u,1.2.3=#0401FF`)
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAccess(strings.NewReader(in))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, DNSNames: []string{"alice"}}
		a.Grant("vol", cert)
		a.Grant("", nil)
	})
}

// TestCertSubjectOpenSSL: the subject luksd logs and matches subject=
// rules against is what `openssl x509 -noout -subject -nameopt RFC2253`
// prints, for subjects in openssl's order and Go's, with DC,
// emailAddress, multi-valued RDNs, escapes, non-ASCII and unknown OIDs.
func TestCertSubjectOpenSSL(t *testing.T) {
	testtool.Need(t, "openssl")
	dir := t.TempDir()
	for i, subj := range []string{
		"/CN=alice/O=Example Org",
		"/O=Example Org/CN=alice",
		"/DC=org/DC=example/O=Example Org/CN=carol/emailAddress=carol@example.org",
		"/C=US/ST=CA/L=San Francisco/street=1 Main St/postalCode=94000/O=Example/OU=Eng/OU=Ops/title=Dr/GN=Carol/SN=Smith/initials=CS/serialNumber=42/UID=carol/pseudonym=cs/name=Carol Smith",
		"/CN=carol+UID=c1/O=x",
		`/CN=\ #a\, b\+c"d;e<f>g=h\\ /O=#lead`,
		"/CN=Zoë Ångström/O=ÉCOLE",
		"/1.2.3.4=unknown/CN=x/businessCategory=b/jurisdictionC=DE/organizationIdentifier=VATDE-1/dnQualifier=q/mail=m@x/uid=u",
	} {
		key, cert := filepath.Join(dir, fmt.Sprint(i, "-key.pem")), filepath.Join(dir, fmt.Sprint(i, "-cert.pem"))
		testtool.Run(t, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
			"-nodes", "-days", "1", "-utf8", "-multivalue-rdn", "-subj", subj, "-keyout", key, "-out", cert)
		want := strings.TrimPrefix(strings.TrimSuffix(testtool.Run(t, "openssl", "x509", "-noout", "-subject",
			"-nameopt", "RFC2253", "-in", cert), "\n"), "subject=")
		pemBytes, err := os.ReadFile(cert)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pemBytes)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got := certSubject(c); got != want {
			t.Errorf("%s:\nluksd   %s\nopenssl %s", subj, got, want)
			continue
		}
		// A rule copied from openssl's output matches (escapes written
		// another way: TestSubjectRuleEscapes).
		a, err := ParseAccess(strings.NewReader("vol rw subject=" + want + "\n"))
		if err != nil {
			t.Errorf("rule subject=%s: %v", want, err)
			continue
		}
		if g := a.Grant("vol", c); g != GrantReadWrite {
			t.Errorf("rule subject=%s does not match its certificate: %d", want, g)
		}
	}
}

func TestSubjectRuleEscapes(t *testing.T) {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: "Zoë, Jr", Organization: []string{"Example Org"}}}
	if got, want := certSubject(c), `CN=Zo\C3\AB\, Jr,O=Example Org`; got != want {
		t.Errorf("certSubject = %s, want %s", got, want)
	}
	for _, rule := range []string{`CN=Zo\C3\AB\, Jr,O=Example Org`, `CN=Zoë\2C Jr,O=Example\20Org`, `CN=Zo\c3\ab\, Jr,O=Example Org`} {
		a, err := ParseAccess(strings.NewReader("vol rw subject=" + rule))
		if err != nil {
			t.Errorf("%s: %v", rule, err)
		} else if g := a.Grant("vol", c); g != GrantReadWrite {
			t.Errorf("%s does not match %s", rule, certSubject(c))
		}
	}
	// Go's order (and Go's OIDs for DC and emailAddress) do not match.
	c = &x509.Certificate{Subject: pkix.Name{CommonName: "alice", Organization: []string{"Example Org"}}}
	a, _ := ParseAccess(strings.NewReader("vol rw subject=O=Example Org,CN=alice"))
	if g := a.Grant("vol", c); g != GrantNone {
		t.Errorf("subject in the wrong order matched: %d", g)
	}
}

// TestDNValueWideStrings: BMPString and UniversalString values decode
// as openssl prints them, and a length that is not a whole number of
// characters is not a string (openssl dumps it as #hex).
func TestDNValueWideStrings(t *testing.T) {
	for _, c := range []struct {
		tag  int
		b    []byte
		want string
		ok   bool
	}{
		{asn1.TagBMPString, []byte{0, 'Z', 0, 'o', 0, 0xeb}, "Zoë", true},
		{asn1.TagBMPString, []byte{0, 'Z', 0}, "", false},
		{28, []byte{0, 0, 0, 'Z', 0, 1, 0xf6, 0x00}, "Z\U0001F600", true},
		{28, []byte{0, 0, 0, 'Z', 0, 0}, "", false},
	} {
		got, ok := dnValueString(asn1.RawValue{Class: asn1.ClassUniversal, Tag: c.tag, Bytes: c.b})
		if got != c.want || ok != c.ok {
			t.Errorf("tag %d % x: got %q %v, want %q %v", c.tag, c.b, got, ok, c.want, c.ok)
		}
	}
}
