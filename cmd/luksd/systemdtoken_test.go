package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// A volume systemd-cryptenroll sealed to a TPM opens in luksd by its
// token alone, to the volume key the passphrase gives; with the TPM out
// of reach, one line and then the passphrase. luksDump prints the token
// as cryptsetup does with systemd's plugin.
func TestSystemdTPM2Token(t *testing.T) {
	w := newWorkspace(t)
	dev := testtool.SWTPM(t)
	img := w.image("tpm2.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	testtool.CryptenrollTPM2(t, dev, img, []string{"PASSWORD=zero"}, "--tpm2-pcrs=7")

	r := w.luksd(nil, "open", "--test-passphrase", "-v", "--token-only", "--tpm2-device", dev, img).ok(t)
	if firstLine(r.stdout) != "Key slot 1 unlocked." {
		t.Fatalf("by TPM2 token: %q", r.stdout)
	}
	twin := w.path("twin.img")
	copyFile(t, img, twin)
	want := volumeKey(t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", w.path("zero"), twin).ok(t).stdout)
	got := volumeKey(t, w.luksd(nil, "luksDump", "--dump-volume-key", "-q", "--token-only", "--tpm2-device", dev, img).ok(t).stdout)
	if got != want {
		t.Fatalf("volume key by TPM2 token %s, by passphrase %s", got, want)
	}

	r = w.luksd(nil, "open", "--test-passphrase", "-d", w.path("zero"), "--tpm2-device", "swtpm:port=1", img)
	r.expect(t, 0, "")
	if !strings.HasPrefix(r.stderr, "Token 0 (systemd-tpm2): no TPM2 device swtpm:port=1") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("TPM out of reach: stderr %q, want one line", r.stderr)
	}
	w.luksd(nil, "open", "--test-passphrase", "--token-only", "--tpm2-device", "swtpm:port=1", img).expect(t, 1, "no TPM2 device")

	cs, ld, _, _ := w.twinRun(img, "luksDump", "IMG")
	w.sameAs("luksDump of a systemd-tpm2 token", cs, ld)
}

// Tokens of every systemd type, as systemd 252's plugins accept them on
// import, dump as cryptsetup dumps them with the plugins: fields present
// and absent, hex of every length, several PCRs, both banks.
func TestSystemdTokensDumpLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("tokens.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	long := make([]byte, 40)
	for i := range long {
		long[i] = byte(i * 7)
	}
	b64 := func(b []byte) string { s, _ := json.Marshal(b); return string(s) }
	blob := b64(long)
	for _, js := range []string{
		`{"type":"systemd-tpm2","keyslots":["0"],"tpm2-blob":` + blob + `,"tpm2-pcrs":[7],"tpm2-pcr-bank":"sha256","tpm2-primary-alg":"ecc","tpm2-policy-hash":"8b5682d81b29435d08d79278150611dc7e5923b2fefcce684a09577b40130a8b","tpm2-pin":false}`,
		`{"type":"systemd-tpm2","keyslots":[],"tpm2-blob":` + blob + `,"tpm2-pcrs":[0,7,15],"tpm2-pcr-bank":"sha1","tpm2-policy-hash":"00ff","tpm2-pin":true}`,
		`{"type":"systemd-tpm2","keyslots":[],"tpm2-blob":` + blob + `,"tpm2-pcrs":[],"tpm2-primary-alg":"rsa","tpm2-policy-hash":"","tpm2-pubkey":"AAEC","tpm2-pubkey-pcrs":[11]}`,
		`{"type":"systemd-fido2","keyslots":["0"],"fido2-credential":` + blob + `,"fido2-salt":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=","fido2-rp":"io.systemd.cryptsetup","fido2-clientPin-required":true,"fido2-up-required":true,"fido2-uv-required":false}`,
		`{"type":"systemd-fido2","keyslots":[],"fido2-credential":"AAEC","fido2-salt":"AAEC"}`,
		`{"type":"systemd-pkcs11","keyslots":["0"],"pkcs11-uri":"pkcs11:model=PKCS%2315%20emulated;token=YubiKey","pkcs11-key":` + blob + `}`,
		`{"type":"systemd-pkcs11","keyslots":[],"pkcs11-uri":"pkcs11:x","pkcs11-key":""}`,
		`{"type":"systemd-recovery","keyslots":["0"]}`,
	} {
		w.cs(nil, "token", "import", "--json-file", w.key("token.json", js), img).ok(t)
	}
	cs, ld, _, _ := w.twinRun(img, "luksDump", "IMG")
	w.sameAs("luksDump of systemd tokens", cs, ld)
	if !strings.Contains(ld.stdout, "tpm2-hash-pcrs:   0+7+15") || !strings.Contains(ld.stdout, "fido2-uv-required:") {
		t.Fatalf("the plugin lines are missing:\n%s", ld.stdout)
	}
}

// A recovery key systemd-cryptenroll --recovery-key enrols (modhex, eight
// groups of eight) is a passphrase: luksd opens its keyslot with it.
func TestSystemdRecoveryKey(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("recovery.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	cmd := exec.Command(testtool.Need(t, "systemd-cryptenroll"), "--recovery-key", img)
	cmd.Env = append(os.Environ(), "PASSWORD=zero") // the peer tool's way
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("systemd-cryptenroll --recovery-key: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if len(key) != 71 || strings.Count(key, "-") != 7 {
		t.Fatalf("recovery key %q is not modhex 8x8", key)
	}
	twin := w.path("twin.img")
	copyFile(t, img, twin)
	r := w.luksd([]byte(key+"\n"), "open", "--test-passphrase", "-v", "--key-slot", "1", img).ok(t)
	cs := w.cs([]byte(key+"\n"), "open", "--test-passphrase", "-v", "--key-slot", "1", twin).ok(t)
	if !strings.Contains(r.stdout, "Key slot 1 unlocked.") || r.stdout != cs.stdout {
		t.Fatalf("recovery key: luksd %q, cryptsetup %q", r.stdout, cs.stdout)
	}
}

// A TPM2 token with a PIN: on a terminal luksd asks for it as cryptsetup
// asks ("Enter token PIN: "), without echo; without a terminal the token
// is passed over and the passphrase asked.
func TestSystemdTPM2TokenPIN(t *testing.T) {
	w := newWorkspace(t)
	dev := testtool.SWTPM(t)
	img := w.image("pin.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	testtool.CryptenrollTPM2(t, dev, img, []string{"PASSWORD=zero", "NEWPIN=4711"}, "--tpm2-pcrs=7", "--tpm2-with-pin=yes")

	s := startOnTTY(t, "open", "--test-passphrase", "-v", "--token-only", "--tpm2-device", dev, img)
	s.answer("Enter token PIN: ", 1, "4711")
	if code, screen := s.wait(); code != 0 || !strings.Contains(screen, "Key slot 1 unlocked.") || strings.Contains(screen, "4711") {
		t.Fatalf("with the PIN: exit %d, screen %q", code, screen)
	}
	r := w.luksd(nil, "open", "--test-passphrase", "-v", "-d", w.path("zero"), "--tpm2-device", dev, img).ok(t)
	if !strings.Contains(r.stdout, "Key slot 0 unlocked.") || !strings.Contains(r.stderr, "needs a TPM2 PIN") {
		t.Fatalf("no terminal: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// FIDO2 and PKCS#11 tokens need hardware luksd has no code for: one line
// each, then the passphrase.
func TestSystemdHardwareTokensPassedOver(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("fido.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	w.cs(nil, "token", "import", "--json-file", w.key("f.json", `{"type":"systemd-fido2","keyslots":["0"],"fido2-credential":"AAEC","fido2-salt":"AAEC"}`), img).ok(t)
	w.cs(nil, "token", "import", "--json-file", w.key("p.json", `{"type":"systemd-pkcs11","keyslots":["0"],"pkcs11-uri":"pkcs11:x","pkcs11-key":"AAEC"}`), img).ok(t)
	r := w.luksd(nil, "open", "--test-passphrase", "-d", w.path("zero"), img).ok(t)
	want := "Token 0 (systemd-fido2): token type not supported by luksd\nToken 1 (systemd-pkcs11): token type not supported by luksd\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	if r := w.luksd(nil, "open", "--test-passphrase", "--disable-external-tokens", "-d", w.path("zero"), img).ok(t); r.stderr != "" {
		t.Fatalf("--disable-external-tokens: stderr %q", r.stderr)
	}
}
