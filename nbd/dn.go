package nbd

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Certificate subjects are rendered as `openssl x509 -noout -subject
// -nameopt RFC2253` prints them, so that a --tls-access rule copied from
// openssl's output matches, and the log shows the same string. Go's
// pkix.Name.String orders attributes its own way and writes DC and
// emailAddress as OIDs, hence this renderer of the raw RDN sequence:
// every attribute, last first (openssl reverses the flattened list, also
// inside a multi-valued RDN), joined with "," and, within an RDN, "+";
// each named by openssl's short name, or in dotted decimal with its
// DER-encoded value as #hex when openssl does not know it.

// dnShortNames are openssl's short names for the attribute types it
// knows (OBJ_nid2sn), by OID.
var dnShortNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.4":                    "SN",
	"2.5.4.5":                    "serialNumber",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "street",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.12":                   "title",
	"2.5.4.13":                   "description",
	"2.5.4.15":                   "businessCategory",
	"2.5.4.17":                   "postalCode",
	"2.5.4.18":                   "postOfficeBox",
	"2.5.4.41":                   "name",
	"2.5.4.42":                   "GN",
	"2.5.4.43":                   "initials",
	"2.5.4.44":                   "generationQualifier",
	"2.5.4.45":                   "x500UniqueIdentifier",
	"2.5.4.46":                   "dnQualifier",
	"2.5.4.51":                   "houseIdentifier",
	"2.5.4.65":                   "pseudonym",
	"2.5.4.72":                   "role",
	"2.5.4.97":                   "organizationIdentifier",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.3":  "mail",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.44": "uid",
	"1.2.840.113549.1.9.1":       "emailAddress",
	"1.2.840.113549.1.9.2":       "unstructuredName",
	"1.3.6.1.4.1.311.60.2.1.1":   "jurisdictionL",
	"1.3.6.1.4.1.311.60.2.1.2":   "jurisdictionST",
	"1.3.6.1.4.1.311.60.2.1.3":   "jurisdictionC",
}

// dnKnownTypes is the set of dnShortNames' names.
var dnKnownTypes = func() map[string]bool {
	m := make(map[string]bool, len(dnShortNames))
	for _, name := range dnShortNames {
		m[name] = true
	}
	return m
}()

type dnAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// dnRDNSET is one relative distinguished name (a SET: encoding/asn1
// goes by the name's suffix).
type dnRDNSET []dnAttribute

// certSubject is cert's subject as openssl's RFC 2253 output has it.
func certSubject(cert *x509.Certificate) string {
	raw := cert.RawSubject
	if len(raw) == 0 { // a certificate made in memory, not parsed
		b, err := asn1.Marshal(cert.Subject.ToRDNSequence())
		if err != nil {
			return cert.Subject.String()
		}
		raw = b
	}
	s, err := renderDN(raw)
	if err != nil {
		return cert.Subject.String()
	}
	return s
}

// renderDN renders a DER-encoded Name as openssl -nameopt RFC2253 does.
func renderDN(der []byte) (string, error) {
	var rdns []dnRDNSET
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", errors.New("trailing data after the subject")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		for j := len(rdns[i]) - 1; j >= 0; j-- {
			if b.Len() > 0 {
				if j == len(rdns[i])-1 {
					b.WriteByte(',')
				} else {
					b.WriteByte('+')
				}
			}
			a := rdns[i][j]
			name, known := dnShortNames[a.Type.String()]
			if !known {
				name = a.Type.String()
			}
			b.WriteString(name)
			b.WriteByte('=')
			s, ok := dnValueString(a.Value)
			if !known || !ok {
				b.WriteByte('#')
				b.WriteString(strings.ToUpper(hex.EncodeToString(a.Value.FullBytes)))
				continue
			}
			b.WriteString(escapeDNValue(s))
		}
	}
	return b.String(), nil
}

// dnValueString decodes a string value as openssl does (UTF8String,
// the one-byte-a-character types as Latin-1, BMPString, UniversalString);
// false for other types, which openssl dumps as #hex.
func dnValueString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return "", false
	}
	b := v.Bytes
	switch v.Tag {
	case asn1.TagUTF8String:
		return string(b), utf8.Valid(b)
	case asn1.TagNumericString, asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String,
		asn1.TagUTCTime, asn1.TagGeneralizedTime, 26: // 26: VisibleString
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		return bigEndianRunes(b, 2)
	case 28: // UniversalString
		return bigEndianRunes(b, 4)
	}
	return "", false
}

// bigEndianRunes decodes characters of width bytes each (2: BMPString,
// 4: UniversalString), big-endian; false when the length is not a whole
// number of characters.
func bigEndianRunes(b []byte, width int) (string, bool) {
	if len(b)%width != 0 {
		return "", false
	}
	var s strings.Builder
	for i := 0; i < len(b); i += width {
		c := rune(binary.BigEndian.Uint16(b[i:]))
		if width == 4 {
			c = rune(binary.BigEndian.Uint32(b[i:]))
		}
		s.WriteRune(c)
	}
	return s.String(), true
}

// escapeDNValue escapes a value as openssl's RFC 2253 flags do: a
// backslash before ,+"\<>; and before a leading space or # and a trailing
// space; \XX for control characters and for each byte of a non-ASCII
// character's UTF-8.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80 || c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%02X", c)
		case strings.IndexByte(`,+"\<>;`, c) >= 0,
			i == 0 && (c == ' ' || c == '#'),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// canonicalDN checks a DN written in a rule and returns it as
// renderDN would print the same subject: escapes may be written
// either way ("Example\20Org", "\C3\A9" or "é"), types must be the
// names openssl prints or dotted OIDs.
func canonicalDN(dn string) (string, error) {
	var out strings.Builder
	i := 0
	for {
		// attribute type
		eq := strings.IndexByte(dn[i:], '=')
		if eq < 0 {
			return "", fmt.Errorf("%q: want TYPE=VALUE after %q", dn, dn[:i])
		}
		typ := dn[i : i+eq]
		if !dnKnownTypes[typ] && !isDottedOID(typ) {
			return "", fmt.Errorf("%q: unknown attribute type %q (write it as openssl does: CN, O, OU, DC, emailAddress, ... or a dotted OID)", dn, typ)
		}
		out.WriteString(typ)
		out.WriteByte('=')
		i += eq + 1
		// value
		var val []byte
		hexValue := i < len(dn) && dn[i] == '#'
		if hexValue {
			j := i + 1
			for j < len(dn) && isHex(dn[j]) {
				j++
			}
			h := dn[i+1 : j]
			if len(h) == 0 || len(h)%2 != 0 {
				return "", fmt.Errorf("%q: %s=#%s is not an even number of hex digits (a leading # in a value is written \\#)", dn, typ, h)
			}
			out.WriteByte('#')
			out.WriteString(strings.ToUpper(h))
			i = j
		} else {
			for i < len(dn) && dn[i] != ',' && dn[i] != '+' {
				c := dn[i]
				switch {
				case c == '\\':
					if i+2 < len(dn) && isHex(dn[i+1]) && isHex(dn[i+2]) {
						v, _ := hex.DecodeString(dn[i+1 : i+3])
						val = append(val, v[0])
						i += 3
						continue
					}
					if i+1 < len(dn) && strings.IndexByte(`,+"\<>;=# `, dn[i+1]) >= 0 {
						val = append(val, dn[i+1])
						i += 2
						continue
					}
					return "", fmt.Errorf("%q: bad escape in %s's value (want \\ before one of ,+\"\\<>;=# or two hex digits)", dn, typ)
				case strings.IndexByte(`"<>;`, c) >= 0:
					return "", fmt.Errorf("%q: %q in %s's value must be escaped with \\", dn, c, typ)
				}
				val = append(val, c)
				i++
			}
			out.WriteString(escapeDNValue(string(val)))
		}
		if i == len(dn) {
			return out.String(), nil
		}
		if dn[i] != ',' && dn[i] != '+' {
			return "", fmt.Errorf("%q: want , or + after %s's value", dn, typ)
		}
		out.WriteByte(dn[i])
		i++
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isDottedOID: "1.2.3" (at least two arcs, digits only).
func isDottedOID(s string) bool {
	arcs := strings.Split(s, ".")
	if len(arcs) < 2 {
		return false
	}
	for _, a := range arcs {
		if a == "" || strings.Trim(a, "0123456789") != "" {
			return false
		}
	}
	return true
}
