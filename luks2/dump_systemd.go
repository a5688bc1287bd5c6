package luks2

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The lines systemd 252's cryptsetup token plugins (systemd-tpm2,
// systemd-fido2, systemd-pkcs11) add under their tokens in luksDump, as
// cryptsetup prints them with the plugins installed (Debian's systemd
// ships them). Formats measured with cryptsetup 2.6.1 here: each field
// has its own label width; some values start on the next line.

// dumpSep starts a continuation line of a plugin's value.
const dumpSep = "\n\t            "

// dumpSystemdToken writes token t's plugin lines, if its type has a
// plugin.
func dumpSystemdToken(b *strings.Builder, typ string, t *node) {
	switch typ {
	case "systemd-tpm2":
		pcrs := "n/a"
		if vals := arrayVals(t.get("tpm2-pcrs")); len(vals) > 0 {
			var s []string
			for _, v := range vals {
				s = append(s, strconv.FormatInt(int64Value(v), 10))
			}
			pcrs = strings.Join(s, "+")
		}
		bank := "n/a"
		if pcrs != "n/a" {
			bank = stringOr(t.get("tpm2-pcr-bank"), "sha256")
		}
		fmt.Fprintf(b, "\ttpm2-hash-pcrs:   %s\n", pcrs)
		fmt.Fprintf(b, "\ttpm2-pcr-bank:    %s\n", bank)
		// systemd 252's plugin prints no signed-policy key, set or not.
		fmt.Fprintf(b, "\ttpm2-pubkey:%s(null)\n", dumpSep)
		fmt.Fprintf(b, "\ttpm2-pubkey-pcrs: n/a\n")
		fmt.Fprintf(b, "\ttpm2-primary-alg: %s\n", stringOr(t.get("tpm2-primary-alg"), "ecc"))
		fmt.Fprintf(b, "\ttpm2-blob:        %s\n", pluginHex(base64Bytes(t.get("tpm2-blob"))))
		fmt.Fprintf(b, "\ttpm2-policy-hash:%s%s\n", dumpSep, pluginHex(hexBytes(t.get("tpm2-policy-hash"))))
		fmt.Fprintf(b, "\ttpm2-pin:         %t\n", boolValue(t.get("tpm2-pin")))
	case "systemd-fido2":
		fmt.Fprintf(b, "\tfido2-credential:%s%s\n", dumpSep, pluginHex(base64Bytes(t.get("fido2-credential"))))
		fmt.Fprintf(b, "\tfido2-salt: %s\n", pluginHex(base64Bytes(t.get("fido2-salt"))))
		if rp := t.get("fido2-rp"); rp != nil {
			fmt.Fprintf(b, "\tfido2-rp:   %s\n", jsonText(rp))
		}
		for _, name := range []string{"fido2-clientPin-required", "fido2-up-required", "fido2-uv-required"} {
			if v := t.get(name); v != nil {
				fmt.Fprintf(b, "\t%s:%s%t\n", name, dumpSep, boolValue(v))
			}
		}
	case "systemd-pkcs11":
		fmt.Fprintf(b, "\tpkcs11-uri: %s\n", jsonText(t.get("pkcs11-uri")))
		fmt.Fprintf(b, "\tpkcs11-key: %s\n", pluginHex(base64Bytes(t.get("pkcs11-key"))))
	}
}

// pluginHex is the plugins' hex dump: bytes apart by a space, 16 to a
// line, continuation lines under the first; "(null)" for none.
func pluginHex(data []byte) string {
	if len(data) == 0 {
		return "(null)"
	}
	var b strings.Builder
	for i, c := range data {
		switch {
		case i > 0 && i%16 == 0:
			b.WriteString(dumpSep)
		case i > 0:
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%02x", c)
	}
	return b.String()
}

func base64Bytes(n *node) []byte {
	data, _ := base64.StdEncoding.DecodeString(jsonText(n))
	return data
}

func hexBytes(n *node) []byte {
	data, _ := hex.DecodeString(jsonText(n))
	return data
}

// stringOr is n's string, or def when n is absent.
func stringOr(n *node, def string) string {
	if n == nil || n.kind != kindString {
		return def
	}
	return jsonText(n)
}

func boolValue(n *node) bool { return n != nil && n.kind == kindBool && jsonText(n) == "true" }
