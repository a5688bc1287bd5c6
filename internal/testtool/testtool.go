// Package testtool finds the real peer tools and the peer corpus for tests.
// A test that needs a tool skips loudly when it is missing outside CI; in CI
// (CI=true), where .ci/run installs every tool, a missing tool fails the test.
package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// InCI reports whether the tests run under .ci/run.
func InCI() bool { return os.Getenv("CI") == "true" }

// Need returns the path of the named program, or skips (fails in CI).
func Need(t testing.TB, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		Missing(t, prog+" is not installed (run `make deps`)")
	}
	return p
}

// Missing skips the test with reason, or fails it in CI.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required in CI: %s", reason)
	}
	t.Skipf("SKIP (not a pass): %s", reason)
}

// RepoRoot returns the repository's top folder (the one holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PeerCorpus returns ../shared/peer/cryptsetup-tests beside the repository,
// cryptsetup's own test images, or skips (fails in CI) when it is absent.
func PeerCorpus(t testing.TB) string {
	t.Helper()
	d := filepath.Join(RepoRoot(t), "..", "shared", "peer", "cryptsetup-tests")
	if _, err := os.Stat(filepath.Join(d, "README.md")); err != nil {
		Missing(t, "peer corpus "+d+" is absent")
	}
	return d
}

// Luksd builds the luksd binary (CGO_ENABLED=0) once per test binary into a
// temporary folder and returns its path.
func Luksd(t testing.TB) string {
	t.Helper()
	luksdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "luksd-bin-")
		if err != nil {
			luksdErr = err
			return
		}
		luksdPath = filepath.Join(dir, "luksd")
		cmd := exec.Command("go", "build", "-o", luksdPath, "./cmd/luksd")
		cmd.Dir = RepoRoot(t)
		// Static, as the VM and release binaries are: without cgo no
		// pthread stacks, so a test can bound the address space.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			luksdErr = &buildError{out: string(out), err: err}
		}
	})
	if luksdErr != nil {
		t.Fatalf("building luksd: %v", luksdErr)
	}
	return luksdPath
}
