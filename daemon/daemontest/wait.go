package daemontest

import (
	"testing"
	"time"
)

// WaitReady waits until a daemon started in this process is ready (its
// Ready callback sent the device on ready) and returns the device; the
// daemon ending first (done) or not in time fails the test.
func WaitReady(t testing.TB, ready <-chan string, done <-chan error) string {
	t.Helper()
	select {
	case dev := <-ready:
		return dev
	case err := <-done:
		t.Fatalf("the daemon failed before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon is not ready")
	}
	return ""
}

// Wait waits until the daemon ends and returns its error; not in time
// fails the test.
func Wait(t testing.TB, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop")
		return nil
	}
}

// Stop closes the volume with close and waits until its daemon ends;
// either failing fails the test.
func Stop(t testing.TB, close func() error, done <-chan error) {
	t.Helper()
	if err := close(); err != nil {
		t.Fatal(err)
	}
	if err := Wait(t, done); err != nil {
		t.Fatal(err)
	}
}
