package main

import (
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// A remote NBD server that negotiates and then answers every request
// with garbage: luksDump fails at once, saying the server broke the
// protocol, instead of redialling it for a minute.
func TestNBDRemoteProtocolViolation(t *testing.T) {
	uri := testtool.FakeNBDExport(t, testtool.NBDExport{}, func(testtool.NBDRequest) []byte {
		return []byte(strings.Repeat("\xfe", 64)) // no reply
	})
	bin := testtool.Luksd(t) // built before the clock starts
	start := time.Now()
	r := runTool(t, nil, bin, "luksDump", uri)
	took := time.Since(start)
	t.Logf("exit %d after %v: %s", r.code, took.Round(time.Millisecond), r.stderr)
	if r.code != exitParams || !strings.Contains(r.stderr, "broke the protocol: bad reply magic") {
		t.Errorf("exit %d, stderr %q; want exit %d naming the bad reply magic", r.code, r.stderr, exitParams)
	}
	if took > 5*time.Second {
		t.Errorf("luksDump failed after %v, want at once", took.Round(time.Millisecond))
	}
}
