package nbd

import (
	"errors"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// Backend failures are logged with the request and the cause, the first
// ten of them and then one in a thousand; client mistakes are not logged.
func TestBackendFailuresLogged(t *testing.T) {
	var log testtool.LogLines
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	dev.Fail(devtest.OpRead, errors.New("injected read failure"))
	dev.Fail(devtest.OpWrite, errors.New("injected write failure"))
	sock, _ := serveMem(t, dev, Config{Logf: log.Logf})
	c := dialGo(t, sock, "")
	if _, code := c.read(t, 1<<20, 1); code != errInval {
		t.Fatalf("read past the end: %d", code)
	}
	for i := range 15 {
		if _, code := c.read(t, 4096, 10); code != errIO {
			t.Fatalf("failing read %d: error %d, want EIO", i, code)
		}
	}
	if code := c.write(t, 8192, []byte("x"), 0); code != errIO {
		t.Fatalf("failing write: error %d, want EIO", code)
	}
	lines := log.Lines()
	var failures []string
	for _, l := range lines {
		if strings.Contains(l, "failed") {
			failures = append(failures, l)
		}
	}
	if len(failures) != 10 {
		t.Fatalf("%d failure lines, want 10 (the rest rate-limited):\n%s", len(failures), strings.Join(lines, "\n"))
	}
	if want := "read of 10 bytes at 4096 failed (1 so far): injected read failure"; !strings.Contains(failures[0], want) {
		t.Errorf("first failure line %q, want it to contain %q", failures[0], want)
	}
}

// Every failed flush is answered EIO and reaches the log: the read
// failures before it do not use up its lines, and flush failures beyond
// the burst are counted in a line when the period ends (here when the
// server closes), so the log accounts for each of them.
func TestFlushFailuresLogged(t *testing.T) {
	var log testtool.LogLines
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	dev.Fail(devtest.OpRead, errors.New("injected read failure"))
	dev.Fail(devtest.OpFlush, errors.New("injected flush failure"))
	sock, srv := serveMem(t, dev, Config{Logf: log.Logf})
	c := dialGo(t, sock, "")
	for range 15 { // a reconnecting backend: reads failed while it was away
		c.read(t, 4096, 10)
	}
	const flushes = 25
	for i := range flushes {
		if code := c.cmd(t, cmdFlush, 0, 0, 0); code != errIO {
			t.Fatalf("failing flush %d: error %d, want EIO", i, code)
		}
	}
	srv.Close()
	logged, suppressed := log.Accounted("injected flush failure")
	if logged == 0 || logged+suppressed != flushes {
		t.Fatalf("%d flush failures logged and %d counted as suppressed, want %d in all (at least one logged):\n%s",
			logged, suppressed, flushes, &log)
	}
}
