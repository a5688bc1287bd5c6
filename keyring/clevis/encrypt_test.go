package clevis

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// clevisDecrypt has the real clevis 19 decrypt a compact JWE.
func clevisDecrypt(t *testing.T, jwe string) (string, error) {
	t.Helper()
	cmd := exec.Command(testtool.Need(t, "clevis"), "decrypt")
	cmd.Stdin = strings.NewReader(jwe)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(err.Error() + ": " + errb.String())
	}
	return string(out), nil
}

func seal(t *testing.T, e *Encrypter, pin, cfg, secret string) string {
	t.Helper()
	jwe, err := e.Encrypt(context.Background(), pin, []byte(cfg), []byte(secret))
	if err != nil {
		t.Fatalf("Encrypt %s %s: %v", pin, cfg, err)
	}
	return jwe
}

// What luksd seals, the real clevis opens, and luksd too: tang on every
// curve tang uses, and sss t-of-n over two servers.
func TestEncryptOpensInClevis(t *testing.T) {
	a, b := testtool.Tang(t, "P-521"), testtool.Tang(t, "P-256")
	c := testtool.Tang(t, "P-384")
	var e Encrypter
	for _, tc := range []struct{ pin, cfg string }{
		{"tang", `{"url":"` + a.URL + `"}`},
		{"tang", `{"url":"` + b.URL + `"}`},
		{"tang", `{"url":"` + c.URL + `/"}`},
		{"sss", `{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`},
		{"sss", `{"t":2,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`},
		{"sss", `{"t":2,"pins":{"tang":{"url":"` + a.URL + `"},"sss":{"t":1,"pins":{"tang":[{"url":"` + c.URL + `"}]}}}}`},
	} {
		jwe := seal(t, &e, tc.pin, tc.cfg, "the secret "+tc.cfg)
		if got, err := clevisDecrypt(t, jwe); err != nil || got != "the secret "+tc.cfg {
			t.Errorf("%s: clevis decrypt: %q, %v", tc.cfg, got, err)
		}
		if got, err := decryptCompact(t, jwe); err != nil || got != "the secret "+tc.cfg {
			t.Errorf("%s: luksd decrypt: %q, %v", tc.cfg, got, err)
		}
	}
	// t=2 of two with one server gone: neither tool opens it.
	jwe := seal(t, &e, "sss", `{"t":2,"pins":{"tang":[{"url":"`+a.URL+`"},{"url":"`+b.URL+`"}]}}`, "x")
	b.Stop()
	if _, err := clevisDecrypt(t, jwe); err == nil {
		t.Error("clevis opened t=2 with one server down")
	}
	if _, err := decryptCompact(t, jwe); err == nil {
		t.Error("luksd opened t=2 with one server down")
	}
}

// advertisement fetches srv's signed advertisement and the SHA-256
// thumbprint of its signing key.
func advertisement(t *testing.T, srv *testtool.TangServer) ([]byte, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/adv")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	keys, _, err := verifyAdvertisement(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tp, err := keys.with("verify")[0].Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), b64.EncodeToString(tp)
}

// Trust as clevis decides it: a thumbprint must name a signing key; an
// advertisement given in the configuration (inline or a file) is
// trusted, but only when its signatures hold; without either, Trust
// is asked with the signing keys' thumbprints.
func TestEncryptTrust(t *testing.T) {
	srv := testtool.Tang(t, "P-521")
	adv, thp := advertisement(t, srv)
	asked := ""
	no := &Encrypter{Trust: func(url string, tps []string) bool { asked = url + " " + strings.Join(tps, ","); return false }}
	url := `"url":"` + srv.URL + `"`

	if _, err := no.Encrypt(context.Background(), "tang", []byte(`{`+url+`}`), []byte("x")); !errors.Is(err, ErrNotTrusted) || asked != srv.URL+" "+thp {
		t.Fatalf("untrusted: %v, asked %q, want ErrNotTrusted and %q", err, asked, srv.URL+" "+thp)
	}
	for _, cfg := range []string{`{` + url + `,"thp":"` + thp + `"}`, `{` + url + `,"adv":` + string(adv) + `}`} {
		jwe := seal(t, no, "tang", cfg, "trusted")
		if got, err := clevisDecrypt(t, jwe); err != nil || got != "trusted" {
			t.Fatalf("%s: %q, %v", cfg, got, err)
		}
	}
	file := filepath.Join(t.TempDir(), "adv.jws")
	if err := os.WriteFile(file, adv, 0o600); err != nil {
		t.Fatal(err)
	}
	seal(t, no, "tang", `{`+url+`,"adv":"`+file+`"}`, "from a file")

	// tang serves no advertisement for a thumbprint it does not know; one
	// given in the configuration is checked against the thumbprint.
	if _, err := no.Encrypt(context.Background(), "tang", []byte(`{`+url+`,"thp":"AAAA"}`), []byte("x")); err == nil || !strings.Contains(err.Error(), "unable to fetch advertisement: '"+srv.URL+"/adv/AAAA': 404") {
		t.Fatalf("unknown thumbprint: %v", err)
	}
	if _, err := no.Encrypt(context.Background(), "tang", []byte(`{`+url+`,"thp":"AAAA","adv":`+string(adv)+`}`), []byte("x")); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "did not sign") {
		t.Fatalf("wrong thumbprint: %v", err)
	}
	var jws map[string]any
	if err := json.Unmarshal(adv, &jws); err != nil {
		t.Fatal(err)
	}
	// The same keys, one byte more: the signatures no longer hold.
	payload, err := b64.DecodeString(jws["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	jws["payload"] = b64.EncodeToString(append(payload, ' '))
	forged, _ := json.Marshal(jws)
	if _, err := no.Encrypt(context.Background(), "tang", []byte(`{`+url+`,"adv":`+string(forged)+`}`), []byte("x")); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "missing signatures") {
		t.Fatalf("forged advertisement: %v, want missing signatures", err)
	}
}

func TestEncryptRefusesBadConfigs(t *testing.T) {
	var e Encrypter
	for _, c := range []struct{ pin, cfg string }{
		{"tang", `{}`},
		{"tang", `[`},
		{"tang", `{"url":"http://127.0.0.1:1"}`},
		{"sss", `{"t":1}`},
		{"sss", `{"t":3,"pins":{"tang":[{"url":"a"},{"url":"b"}]}}`},
		{"sss", `{"t":0,"pins":{"tang":[{"url":"a"}]}}`},
		{"tpm2", `{}`},
	} {
		if _, err := e.Encrypt(context.Background(), c.pin, []byte(c.cfg), []byte("x")); err == nil {
			t.Errorf("%s %s: no error", c.pin, c.cfg)
		}
	}
}

// Describe prints the binding as `clevis luks list` does, for JWEs the
// real clevis made.
func TestDescribe(t *testing.T) {
	a, b := testtool.Tang(t, "P-521"), testtool.Tang(t, "P-256")
	for _, c := range []struct{ pin, cfg, want string }{
		{"tang", `{"url":"` + a.URL + `"}`, `tang '{"url":"` + a.URL + `"}'`},
		{"sss", `{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}`,
			`sss '{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"},{"url":"` + b.URL + `"}]}}'`},
		{"sss", `{"t":1,"pins":{"sss":{"t":1,"pins":{"tang":[{"url":"` + b.URL + `"}]}},"tang":[{"url":"` + a.URL + `"}]}}`,
			`sss '{"t":1,"pins":{"tang":[{"url":"` + a.URL + `"}],"sss":{"t":1,"pins":{"tang":[{"url":"` + b.URL + `"}]}}}}'`},
	} {
		got, err := Describe(mustQuote(encrypt(t, "x", c.pin, c.cfg)))
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", c.cfg, got, err, c.want)
		}
	}
}
