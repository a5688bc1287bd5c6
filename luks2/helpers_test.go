package luks2

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Cheap PBKDF parameters for tests (race-mode argon2 is slow).
var (
	cheapArgon2id = PBKDF{Type: "argon2id", Iterations: 4, MemoryKiB: 32, Parallel: 1}
	cheapArgon2i  = PBKDF{Type: "argon2i", Iterations: 4, MemoryKiB: 64, Parallel: 2}
	cheapPBKDF2   = PBKDF{Type: "pbkdf2", Hash: "sha256", Iterations: 1000}
)

// cryptsetup runs the real cryptsetup and returns its stdout; a non-zero
// exit fails the test unless wantFail.
func cryptsetup(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCryptsetup(t, args...)
	if err != nil {
		t.Fatalf("cryptsetup %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runCryptsetup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := testtool.Need(t, "cryptsetup")
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// keyFile writes secret into a file for --key-file (secrets never in argv).
func keyFile(t *testing.T, secret []byte) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(secret); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

// image creates a sparse image file of size bytes.
func image(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// fileDev is an image file as a Device: Flush is fsync. With Size it is a
// blockdev.Device, for devtest's layers to stack on.
type fileDev struct{ *os.File }

func (f fileDev) Flush() error { return f.Sync() }

func (f fileDev) Size() int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

func openRW(t *testing.T, path string) (fileDev, int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fileDev{f}, st.Size()
}

func readHdr(t *testing.T, path string) (*Header, fileDev) {
	t.Helper()
	f, size := openRW(t, path)
	h, err := Read(f, size)
	if err != nil {
		t.Fatalf("Read %s: %v", path, err)
	}
	return h, f
}

// cryptsetupVolumeKey returns the volume key cryptsetup prints with
// luksDump --dump-volume-key.
func cryptsetupVolumeKey(t *testing.T, img, keyfile string, extra ...string) []byte {
	t.Helper()
	args := append([]string{"luksDump", "-q", "--dump-volume-key", "--key-file", keyfile}, extra...)
	out := cryptsetup(t, append(args, img)...)
	return parseMKDump(t, out)
}

func parseMKDump(t *testing.T, out string) []byte {
	t.Helper()
	i := strings.Index(out, "MK dump:")
	if i < 0 {
		t.Fatalf("no MK dump in:\n%s", out)
	}
	var hexs strings.Builder
	for _, line := range strings.Split(out[i+len("MK dump:"):], "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, ":") {
			break
		}
		hexs.WriteString(strings.ReplaceAll(line, " ", ""))
	}
	vk, err := hex.DecodeString(hexs.String())
	if err != nil {
		t.Fatalf("bad MK dump %q: %v", hexs.String(), err)
	}
	return vk
}

func dumpText(t *testing.T, h *Header, opts DumpOptions) string {
	t.Helper()
	var b strings.Builder
	if err := h.Dump(&b, opts); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sameLines compares two texts line by line and reports the first difference.
func sameLines(t *testing.T, what, got, want string) {
	t.Helper()
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s: line %d differs\nluksd:      %q\ncryptsetup: %q\n--- luksd:\n%s\n--- cryptsetup:\n%s", what, i+1, gl, wl, got, want)
		}
	}
}
