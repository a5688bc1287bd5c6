package luks2

import (
	"os"
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
// exit fails the test.
func cryptsetup(t *testing.T, args ...string) string {
	t.Helper()
	return testtool.Run(t, "cryptsetup", args...)
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

// cryptsetupUnlocksHere reports whether this host's cryptsetup can decrypt
// keyslots encrypted with the cipher spec. cryptsetup 2.6.1 decrypts a
// keyslot in userspace when its crypto backend (OpenSSL on Debian) has the
// cipher, and otherwise through a temporary dm-crypt mapping: OpenSSL has no
// Serpent or Twofish and this host no dm-crypt ("Cannot initialize
// device-mapper"), so those keyslots are compared with cryptsetup in the VM
// (contrib/vmtest scenario 22) instead.
func cryptsetupUnlocksHere(spec string) bool {
	return !strings.HasPrefix(spec, "serpent-") && !strings.HasPrefix(spec, "twofish-")
}

// cryptsetupVolumeKey returns the volume key cryptsetup prints with
// luksDump --dump-volume-key.
func cryptsetupVolumeKey(t *testing.T, img, keyfile string, extra ...string) []byte {
	t.Helper()
	args := append([]string{"luksDump", "-q", "--dump-volume-key", "--key-file", keyfile}, extra...)
	return testtool.VolumeKey(t, cryptsetup(t, append(args, img)...))
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
