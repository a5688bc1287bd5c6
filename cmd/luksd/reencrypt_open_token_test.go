package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// A volume killed part-way through a reencryption opens by token as it
// does by passphrase: the luks2-keyring token's passphrase opens both
// volume keys (cryptsetup gives the new keyslots the old ones' tokens),
// and every byte served is the plaintext.
func TestOpenMidReencryptionByToken(t *testing.T) {
	testtool.KeyringSession(t)
	testtool.AddKernelKey(t, "user", "luksd-test:reenc", []byte("pw"))
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	c := reencCases[0]
	base, plain := reencImage(w, "base.img", c, key, 48<<20)
	w.cs(nil, "token", "import", "--json-file", w.key("token", keyringTokenJSON("0", "luksd-test:reenc")), base).ok(t)
	flags := append([]string{"--resilience", "checksum", "--hotzone-size", "262144", "-d", key, "--force-offline-reencrypt", "-q"}, c.reencrypt...)
	w.cs(nil, append([]string{"reencrypt", "--init-only", base}, flags...)...).ok(t)
	img := midReencryption(t, w, base, w.cryptsetup, syscall.SIGKILL, flags)

	got := serveReadWith(t, w, "--token-only", img)
	if i := firstDiff(got, plain); i >= 0 {
		t.Fatalf("served by token, the volume in reencryption reads wrong from byte %d", i)
	}
	// A token that holds no keyslot's passphrase opens nothing.
	testtool.AddKernelKey(t, "user", "luksd-test:reenc", []byte("wrong"))
	r := runTool(t, nil, testtool.Luksd(t), "serve", "--socket", w.path("sock2"), "--token-only", img)
	if r.code != exitPermission {
		t.Fatalf("serve --token-only with a wrong token passphrase: exit %d: %s", r.code, r.stderr)
	}
}

// A volume with a detached header (--header), killed part-way through a
// cryptsetup reencryption, is served with the header from --header and
// the data from the device, every byte the plaintext.
func TestOpenMidReencryptionDetachedHeader(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	data, hdr := w.path("data.img"), w.path("hdr.img")
	plain := make([]byte, 32<<20)
	rand.Read(plain)
	if err := os.WriteFile(data, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	w.cs(nil, append([]string{"luksFormat", "-q", "--header", hdr, data, key, "--cipher", "aes-xts-plain64", "--key-size", "512"},
		cheapPBKDF("pbkdf2")...)...).ok(t)
	// The data, encrypted in place with the volume key (data offset 0).
	vk, err := hex.DecodeString(volumeKey(t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, hdr).ok(t).stdout))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := dmcrypt.New("aes-xts-plain64", vk)
	if err != nil {
		t.Fatal(err)
	}
	ct := bytes.Clone(plain)
	sc.Encrypt(ct, 0, 4096)
	if err := os.WriteFile(data, ct, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--hotzone-size", "262144", "-d", key, "--force-offline-reencrypt", "-q", "--key-size", "256"}
	w.cs(nil, append([]string{"reencrypt", "--init-only", "--header", hdr, data}, flags...)...).ok(t)
	midData, midHdr := w.path("mid-data.img"), w.path("mid-hdr.img")
	delay := 5 * time.Millisecond
	for try := 0; ; try++ {
		if try == 60 {
			t.Fatal("no kill left the reencryption part-way")
		}
		copyFile(t, data, midData)
		copyFile(t, hdr, midHdr)
		interrupt(t, delay, syscall.SIGKILL, w.cryptsetup, append([]string{"reencrypt", "--resume-only", "--header", midHdr, midData}, flags...)...)
		dump := w.cs(nil, "luksDump", midHdr).ok(t).stdout
		if !strings.Contains(dump, "online-reencrypt") {
			delay = max(delay*2/3, time.Millisecond)
			continue
		}
		if strings.Contains(dump, "length: 0 [bytes]") || !strings.Contains(dump, "length: ") {
			delay = delay * 3 / 2
			continue
		}
		break
	}
	got := serveReadWith(t, w, "--header", midHdr, "-d", key, midData)
	if i := firstDiff(got, plain); i >= 0 {
		t.Fatalf("served with --header, the volume in reencryption reads wrong from byte %d", i)
	}
}
