package testtool

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Run runs the named program (see Need) with args and returns its
// standard output; a non-zero exit fails the test with both outputs.
func Run(t testing.TB, prog string, args ...string) string {
	t.Helper()
	out, err := Output(t, prog, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return out
}

// Output runs the named program (see Need) with args. It returns the
// standard output, and on failure the error with the standard error
// appended to the output.
func Output(t testing.TB, prog string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Need(t, prog), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// CryptsetupFormat formats img with the real cryptsetup (luksFormat, a
// cheap PBKDF2 keyslot opened by keyFile), extra options before img.
func CryptsetupFormat(t testing.TB, img, keyFile string, extra ...string) {
	t.Helper()
	args := []string{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", keyFile}
	Run(t, "cryptsetup", append(append(args, extra...), img)...)
}
