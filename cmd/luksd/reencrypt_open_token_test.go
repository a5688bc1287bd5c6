package main

import (
	"os"
	"syscall"
	"testing"

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

	sock := w.path("sock")
	p := startServe(t, sock, "--token-only", img)
	out := w.path("out")
	testtool.Run(t, "nbdcopy", p.uri(), out)
	p.stop(t)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
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
