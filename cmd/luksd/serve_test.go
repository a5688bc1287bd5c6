package main

import (
	"bytes"
	"crypto/aes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
	"golang.org/x/crypto/xts"
)

// serveProc is a running `luksd serve`.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	sock   string
	exited chan error
}

// startServe runs `luksd serve --socket SOCK args...` and waits until the
// socket exists (or the process exits, which fails the test).
func startServe(t *testing.T, sock string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{stderr: &bytes.Buffer{}, sock: sock, exited: make(chan error, 1)}
	p.cmd = exec.Command(testtool.Luksd(t), append([]string{"serve", "--socket", sock}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	for {
		// The socket file exists from bind(), before listen(): only a
		// successful connection proves the server is accepting.
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return p
		}
		select {
		case err := <-p.exited:
			t.Fatalf("luksd serve exited before listening: %v\n%s", err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and checks for a clean exit; it returns the log.
func (p *serveProc) stop(t *testing.T) string {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.exited; err != nil {
		t.Fatalf("luksd serve after SIGTERM: %v\n%s", err, p.stderr)
	}
	if _, err := os.Stat(p.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s left behind after exit", p.sock)
	}
	return p.stderr.String()
}

func (p *serveProc) uri() string { return "nbd+unix:///?socket=" + p.sock }

// serveFormat makes a LUKS image with cryptsetup (cheap PBKDF) and a key
// file, returning the image path and the key file path.
func serveFormat(t *testing.T, dir string, size int64, extra ...string) (string, string) {
	t.Helper()
	img := testtool.ImageAt(t, dir, "img", size)
	key := testtool.KeyFile(t, []byte("serve test passphrase"))
	testtool.CryptsetupFormat(t, img, key, extra...)
	return img, key
}

// serveVolumeKey asks cryptsetup for the volume key and the data offset.
func serveVolumeKey(t *testing.T, img, key string) ([]byte, int64) {
	t.Helper()
	vk := testtool.VolumeKey(t, testtool.Run(t, "cryptsetup", "luksDump", "-q", "--dump-volume-key", "--key-file", key, img))
	dump := testtool.Run(t, "cryptsetup", "luksDump", img)
	if m := regexp.MustCompile(`Payload offset:\s*(\d+)`).FindStringSubmatch(dump); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return vk, n * 512
	}
	m := regexp.MustCompile(`offset:\s*(\d+) \[bytes\]`).FindStringSubmatch(dump)
	if m == nil {
		t.Fatalf("no data offset in luksDump:\n%s", dump)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return vk, n
}

// xtsDecrypt decrypts n bytes of the data segment with x/crypto/xts,
// independently of luksd.
func xtsDecrypt(t *testing.T, img string, vk []byte, off, n int64, sectorSize int) []byte {
	t.Helper()
	c, err := xts.NewCipher(aes.NewCipher, vk)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	for s := int64(0); s < n; s += int64(sectorSize) {
		c.Decrypt(out[s:s+int64(sectorSize)], ct[off+s:off+s+int64(sectorSize)], uint64(s/512))
	}
	return out
}

func TestServeEndToEnd(t *testing.T) {
	for _, sector := range []int{512, 4096} {
		t.Run(fmt.Sprintf("aes-xts-%d", sector), func(t *testing.T) {
			dir := t.TempDir()
			img, key := serveFormat(t, dir, 24<<20, "--type", "luks2", "--sector-size", strconv.Itoa(sector))
			sock := filepath.Join(dir, "nbd.sock")
			p := startServe(t, sock, "--key-file", key, "--export-name", "vol", img)
			if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("socket mode %v, want 0600 (%v)", fi.Mode(), err)
			}
			info := testtool.Run(t, "nbdinfo", p.uri())
			for _, want := range []string{"export-size: 8388608", "can_flush: true", "can_fua: true", "can_trim: false",
				"can_zero: true", "can_multi_conn: true", fmt.Sprintf("block_size_preferred: %d", sector)} {
				if !strings.Contains(info, want) {
					t.Fatalf("nbdinfo lacks %q:\n%s", want, info)
				}
			}
			// Whole sectors, then 512-byte writes inside 4096-byte sectors.
			testtool.Run(t, "qemu-io", "--image-opts", "-c", "write -P 0x33 4M 2M", "-c", "write -P 0x44 4194816 512",
				"-c", "write -P 0x55 5M 1536", "-c", "flush", "driver=nbd,server.type=unix,export=vol,server.path="+sock)
			data := make([]byte, 4<<20)
			rand.Read(data)
			src := filepath.Join(dir, "src")
			os.WriteFile(src, data, 0o600)
			testtool.Run(t, "nbdcopy", "--connections=4", src, "nbd+unix:///vol?socket="+sock+"&")
			log := p.stop(t)
			if n := strings.Count(log, "nbd: connection"); n < 3 {
				t.Errorf("expected one log line per connection, got %d:\n%s", n, log)
			}

			// Check against cryptsetup's volume key and an independent XTS.
			vk, off := serveVolumeKey(t, img, key)
			pt := xtsDecrypt(t, img, vk, off, 8<<20, sector)
			want := append(bytes.Clone(data), bytes.Repeat([]byte{0x33}, 2<<20)...)
			copy(want[4<<20+512:], bytes.Repeat([]byte{0x44}, 512))
			copy(want[5<<20:], bytes.Repeat([]byte{0x55}, 1536))
			if !bytes.Equal(pt[:6<<20], want) {
				t.Fatal("the image does not decrypt (cryptsetup's key, x/crypto/xts) to what was written")
			}

			// The data survives a restart.
			p = startServe(t, sock, "--key-file", key, "--readonly", img)
			out := filepath.Join(dir, "out")
			testtool.Run(t, "nbdcopy", p.uri(), out)
			got, _ := os.ReadFile(out)
			if !bytes.Equal(got[:4<<20], data) {
				t.Fatal("data read after a restart differs")
			}
			r := exec.Command("qemu-io", "--image-opts", "-c", "write -P 1 0 4k", "driver=nbd,server.type=unix,server.path="+sock)
			if o, _ := r.CombinedOutput(); !strings.Contains(string(o), "ermission denied") && !strings.Contains(string(o), "read-only") && !strings.Contains(string(o), "read only") {
				t.Fatalf("write to a --readonly export: %s", o)
			}
			p.stop(t)
		})
	}
}

func TestServeCryptsetupReencryptedPlaintext(t *testing.T) {
	// cryptsetup encrypts an image holding known plaintext in place
	// (offline, no kernel needed); luksd must serve that plaintext.
	for _, sector := range []int{512, 4096} {
		t.Run(fmt.Sprintf("aes-xts-%d", sector), func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "img")
			key := filepath.Join(dir, "key")
			os.WriteFile(key, []byte("reencrypt key"), 0o600)
			plain := make([]byte, 40<<20)
			rand.Read(plain)
			os.WriteFile(img, plain, 0o600)
			testtool.Run(t, "cryptsetup", "reencrypt", "--encrypt", "--type", "luks2", "--reduce-device-size", "32M",
				"--sector-size", strconv.Itoa(sector), "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
				"-q", "--key-file", key, img)
			p := startServe(t, filepath.Join(dir, "s"), "--readonly", "--key-file", key, img)
			out := filepath.Join(dir, "out")
			testtool.Run(t, "nbdcopy", p.uri(), out)
			p.stop(t)
			got, _ := os.ReadFile(out)
			if len(got) < 8<<20 || !bytes.Equal(got[:8<<20], plain[:8<<20]) {
				t.Fatalf("luksd serves %d bytes that differ from the plaintext cryptsetup encrypted", len(got))
			}
		})
	}
}

func TestServeLUKS1(t *testing.T) {
	// cryptsetup formats LUKS1; the ciphertext is written independently with
	// cryptsetup's volume key; luksd serves the plaintext.
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 8<<20, "--type", "luks1")
	vk, off := serveVolumeKey(t, img, key)
	c, err := xts.NewCipher(aes.NewCipher, vk)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(8<<20) - off
	plain := make([]byte, n)
	rand.Read(plain)
	ct := make([]byte, n)
	for s := int64(0); s < n; s += 512 {
		c.Encrypt(ct[s:s+512], plain[s:s+512], uint64(s/512))
	}
	f, _ := os.OpenFile(img, os.O_WRONLY, 0)
	f.WriteAt(ct, off)
	f.Close()
	p := startServe(t, filepath.Join(dir, "s"), "--key-file", key, img)
	out := filepath.Join(dir, "out")
	testtool.Run(t, "nbdcopy", p.uri(), out)
	p.stop(t)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, plain) {
		t.Fatalf("luksd serves %d bytes that differ from the LUKS1 plaintext (%d bytes)", len(got), len(plain))
	}
}

func TestServeRefusesBeforeListening(t *testing.T) {
	dir := t.TempDir()
	img, _ := serveFormat(t, dir, 20<<20, "--type", "luks2")
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("not the passphrase"), 0o600)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, make([]byte, 1<<20), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"wrong passphrase", []string{"--key-file", wrong, img}, exitPermission, "No key available with this passphrase."},
		{"not LUKS", []string{"--key-file", wrong, plain}, exitParams, "is not a valid LUKS device"},
		{"missing image", []string{"--key-file", wrong, filepath.Join(dir, "nope")}, exitDevice, "does not exist"},
		{"no image", []string{"--key-file", wrong}, exitParams, "requires device"},
		{"export name too long", []string{"--export-name", strings.Repeat("e", 4097), "--key-file", wrong, img}, exitParams, "longer than NBD's 4096"},
	} {
		sock := filepath.Join(dir, "s")
		cmd := exec.Command(testtool.Luksd(t), append([]string{"serve", "--socket", sock}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(string(out), tc.msg) {
			t.Errorf("%s: exit %v, output %q; want exit %d and %q", tc.name, err, out, tc.code, tc.msg)
		}
		if strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%s: more than one line of output: %q", tc.name, out)
		}
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a socket was created", tc.name)
		}
	}
}

func TestServeAllowDiscardsAndTCP(t *testing.T) {
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 20<<20, "--type", "luks2")
	p := startServe(t, filepath.Join(dir, "s"), "--key-file", key, "--allow-discards", img)
	if info := testtool.Run(t, "nbdinfo", p.uri()); !strings.Contains(info, "can_trim: true") {
		t.Fatalf("--allow-discards: nbdinfo says\n%s", info)
	}
	p.stop(t)

	// TCP on an ephemeral loopback port; the log line names the address.
	cmd := exec.Command(testtool.Luksd(t), "serve", "--listen", "127.0.0.1:0", "--key-file", key, img)
	r, w, _ := os.Pipe()
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	buf := make([]byte, 4096)
	var logged string
	for !strings.Contains(logged, "nbd://") {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("luksd serve --listen: %v (%q)", err, logged)
		}
		logged += string(buf[:n])
	}
	m := regexp.MustCompile(`nbd://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(logged)
	if m == nil {
		t.Fatalf("no TCP address in %q", logged)
	}
	if info := testtool.Run(t, "nbdinfo", "--size", "nbd://"+m[1]+"/"); strings.TrimSpace(info) != "4194304" {
		t.Fatalf("nbdinfo over TCP: %q", info)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v", err)
	}
}

// A volume behind a read-only NBD export is served read-only: clients
// are told so, and so is the log line that says what is served.
func TestServeReadOnlyNBDBackend(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 20<<20, "--type", "luks2")
	ro := filepath.Join(dir, "ro.sock")
	testtool.StartPeerServer(t, "unix", ro, "nbdkit", "-f", "-r", "-U", ro, "file", img)
	p := startServe(t, filepath.Join(dir, "luksd.sock"), "--key-file", key, "nbd+unix:///?socket="+ro)
	if info := testtool.Run(t, "nbdinfo", p.uri()); !strings.Contains(info, "is_read_only: true") {
		t.Fatalf("nbdinfo of a volume on a read-only export:\n%s", info)
	}
	if log := p.stop(t); !strings.Contains(log, "-byte sectors, read-only) on ") {
		t.Fatalf("the serving line does not say read-only:\n%s", log)
	}
}
