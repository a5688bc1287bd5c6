package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// A volume whose ciphertext lives behind a remote NBD server (here a real
// nbdkit file export on a unix socket): luksFormat writes it over NBD,
// cryptsetup opens the file nbdkit serves, the key verbs and luksDump work
// by URI, and luksd serve reads through to it. A read-only export refuses
// the header write.
func TestNBDRemoteVolume(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	disk := w.image("remote.img")
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	testtool.StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock, "file", disk)
	uri := "nbd+unix:///?socket=" + sock
	key := w.key("pw", "pw")
	w.luksd(nil, append([]string{"luksFormat", "-q", "--key-file", key, uri}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.luksd(nil, append([]string{"luksAddKey", "--key-file", key, uri, w.key("pw2", "pw2")}, cheapPBKDF("pbkdf2")...)...).ok(t)

	twin := w.path("twin.img")
	copyFile(t, disk, twin)
	w.cs(nil, "open", "--test-passphrase", "--key-file", w.path("pw2"), twin).ok(t)
	want := w.cs(nil, "luksDump", twin).ok(t).stdout
	if got := w.luksd(nil, "luksDump", uri).ok(t).stdout; got != want {
		t.Fatalf("luksDump by URI differs from cryptsetup's of the file:\n%s\n---\n%s", got, want)
	}

	// Data written through luksd serve reaches the remote file encrypted
	// and reads back.
	served := filepath.Join(t.TempDir(), "luksd.sock")
	srv := startServe(t, served, "--key-file", key, uri)
	defer srv.stop(t)
	pattern := bytes.Repeat([]byte("remote ciphertext "), 1<<16)
	src := filepath.Join(t.TempDir(), "pattern")
	if err := os.WriteFile(src, pattern[:1<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	testtool.Run(t, "nbdcopy", src, "nbd+unix:///?socket="+served)
	back := filepath.Join(t.TempDir(), "back")
	testtool.Run(t, "nbdcopy", "nbd+unix:///?socket="+served, back)
	got, err := os.ReadFile(back)
	if err != nil || !bytes.Equal(got[:1<<20], pattern[:1<<20]) {
		t.Fatalf("data read back through luksd serve over NBD differs (%v)", err)
	}
	// A second daemon on this host for the same remote volume is refused
	// as in use (exit 5), whichever way the location is written.
	for _, loc := range []string{uri, uri + "/"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		second := exec.CommandContext(ctx, testtool.Luksd(t), "serve", "--socket", filepath.Join(t.TempDir(), "second.sock"),
			"--key-file", key, loc)
		var stderr bytes.Buffer
		second.Stderr = &stderr
		err := second.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(stderr.String(), "which is in use") {
			t.Fatalf("a second serve of %s beside the first: %v, %q", loc, err, stderr.String())
		}
	}

	raw, _ := os.ReadFile(disk)
	if bytes.Contains(raw, []byte("remote ciphertext remote ciphertext")) {
		t.Fatal("the remote file holds plaintext")
	}

	ro := filepath.Join(t.TempDir(), "ro.sock")
	testtool.StartPeerServer(t, "unix", ro, "nbdkit", "-f", "-r", "-U", ro, "file", twin)
	r := w.luksd(nil, "luksAddKey", "--key-file", key, "nbd+unix:///?socket="+ro, w.path("pw2"))
	if r.code == 0 || !strings.Contains(r.stderr, "NBD export is read-only") {
		t.Fatalf("a header write to a read-only export: exit %d, %q", r.code, r.stderr)
	}
}

// A remote server that answers every read with EIO: the header verbs say
// what failed before cryptsetup's "not a valid LUKS device" line, and
// exit as cryptsetup does for a device it cannot load.
func TestNBDRemoteReadErrorSaysWhy(t *testing.T) {
	w := newWorkspace(t)
	disk, key := w.formatted("pbkdf2")
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	testtool.StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock, "--filter=error", "file", disk,
		"error-pread=EIO", "error-pread-rate=1")
	uri := "nbd+unix:///?socket=" + sock
	for _, args := range [][]string{{"luksDump", uri}, {"open", "--test-passphrase", "--key-file", key, uri}} {
		r := w.luksd(nil, args...)
		want := "Cannot read device " + uri + ": NBD server: read: input/output error.\n" +
			"Device " + uri + " is not a valid LUKS device.\n"
		if r.code != exitParams || r.stderr != want {
			t.Errorf("%s: exit %d, stderr %q; want exit %d, %q", args[0], r.code, r.stderr, exitParams, want)
		}
	}
}
