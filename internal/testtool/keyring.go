package testtool

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// KeyringSession gives the calling test's thread a new, empty session
// keyring, which the test's keyctl calls and the commands it starts (they
// inherit it) use: tests add kernel keys without touching the user's
// keyrings, which other tests and users of this uid share. The goroutine
// stays locked to the thread, so the thread ends with the test and no
// other goroutine runs with that keyring.
func KeyringSession(t testing.TB) {
	t.Helper()
	runtime.LockOSThread()
	// A NULL name: a new anonymous session keyring.
	if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
		Missing(t, "no kernel keyring: "+errno.Error())
	}
}

// AddKernelKey adds a kernel key of type typ ("user", "logon") with payload
// to the session keyring KeyringSession gave the test.
func AddKernelKey(t testing.TB, typ, description string, payload []byte) {
	t.Helper()
	if _, err := unix.AddKey(typ, description, payload, unix.KEY_SPEC_SESSION_KEYRING); err != nil {
		t.Fatalf("add_key %s %q: %v", typ, description, err)
	}
}
