package tpm2

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/luksd/luksd/internal/testtool"
)

// enrolled formats an image (passphrase "zero") and has the real
// systemd-cryptenroll seal a new keyslot to the software TPM dev with
// args (and NEWPIN=pin when pin is set); it returns the image and its
// token's JSON.
func enrolled(t *testing.T, dev, pin string, args ...string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	img, key := testtool.ImageAt(t, dir, "vol.img", 20<<20), filepath.Join(dir, "zero")
	if err := os.WriteFile(key, []byte("zero"), 0o600); err != nil {
		t.Fatal(err)
	}
	testtool.CryptsetupFormat(t, img, key)
	env := []string{"PASSWORD=zero"}
	if pin != "" {
		env = append(env, "NEWPIN="+pin)
	}
	testtool.CryptenrollTPM2(t, dev, img, env, args...)
	return img, []byte(testtool.Run(t, "cryptsetup", "token", "export", "--token-id", "0", img))
}

// The passphrase luksd unseals opens the keyslot systemd-cryptenroll
// made (cryptsetup checks it); after a PCR in the policy changes, the
// TPM refuses.
func TestUnsealSystemdEnrolment(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		pcr  int
	}{
		{"pcr7", []string{"--tpm2-pcrs=7"}, 7},
		{"pcr0+7", []string{"--tpm2-pcrs=0+7"}, 0},
		{"no-pcrs", []string{"--tpm2-pcrs="}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := testtool.SWTPM(t)
			img, js := enrolled(t, dev, "", c.args...)
			tok, err := ParseToken(js)
			if err != nil {
				t.Fatal(err)
			}
			tpm, err := Open(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer tpm.Close()
			pass, err := tok.Passphrase(tpm, nil)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-slot", "1", img)
			cmd.Stdin = strings.NewReader(string(pass.Bytes()))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cryptsetup refused the unsealed passphrase: %v\n%s", err, out)
			}
			pass.Wipe()
			if c.pcr < 0 {
				return
			}
			_, err = tpm2.PCRExtend{
				PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(c.pcr), Auth: tpm2.PasswordAuth(nil)},
				Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: make([]byte, 32)}}},
			}.Execute(tpm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tok.Passphrase(tpm, nil); !errors.Is(err, ErrPolicy) {
				t.Fatalf("after PCR %d changed: %v, want ErrPolicy", c.pcr, err)
			}
		})
	}
}

func TestParseTokenRefusesOthers(t *testing.T) {
	for _, js := range []string{
		`{"type":"clevis"}`,
		`{"type":"systemd-tpm2","tpm2-blob":"AAE="}`,
		`{"type":"systemd-tpm2","tpm2-blob":"!"}`,
		`{"type":"systemd-tpm2","tpm2-blob":"","tpm2-pcrs":[24]}`,
		`[`,
	} {
		if _, err := ParseToken([]byte(js)); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", js, err)
		}
	}
}

func TestOpenMissingDevice(t *testing.T) {
	for _, dev := range []string{filepath.Join(t.TempDir(), "tpmrm0"), "swtpm:port=1", "swtpm:path=/x"} {
		if _, err := Open(dev); !errors.Is(err, ErrNoDevice) {
			t.Errorf("%s: %v, want ErrNoDevice", dev, err)
		}
	}
}

// A token enrolled with --tpm2-with-pin=yes unseals with its PIN only.
func TestUnsealWithPIN(t *testing.T) {
	dev := testtool.SWTPM(t)
	img, js := enrolled(t, dev, "4711", "--tpm2-pcrs=7", "--tpm2-with-pin=yes")
	tok, err := ParseToken(js)
	if err != nil || !tok.PIN {
		t.Fatalf("token %v, PIN %v", err, tok != nil && tok.PIN)
	}
	tpm, err := Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer tpm.Close()
	if _, err := tok.Passphrase(tpm, nil); !errors.Is(err, ErrPIN) {
		t.Fatalf("no PIN: %v, want ErrPIN", err)
	}
	if _, err := tok.Passphrase(tpm, []byte("4712")); !errors.Is(err, ErrPolicy) {
		t.Fatalf("wrong PIN: %v, want ErrPolicy", err)
	}
	pass, err := tok.Passphrase(tpm, []byte("4711"))
	if err != nil {
		t.Fatal(err)
	}
	defer pass.Wipe()
	cmd := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-slot", "1", img)
	cmd.Stdin = strings.NewReader(string(pass.Bytes()))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cryptsetup refused the passphrase unsealed with the PIN: %v\n%s", err, out)
	}
}
