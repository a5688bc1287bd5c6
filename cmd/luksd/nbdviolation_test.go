package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/daemon/daemontest"
	"github.com/luksd/luksd/internal/testtool"
)

// lyingNBD is a fake NBD server that negotiates a 1 MiB export and then
// answers every request with bytes that are no reply; violation is what
// the client's error says of it.
func lyingNBD(t *testing.T) (uri, violation string) {
	uri = testtool.FakeNBDExport(t, testtool.NBDExport{}, func(testtool.NBDRequest) []byte {
		return []byte(strings.Repeat("\xfe", 64))
	})
	return uri, "NBD read: NBD server broke the protocol: bad reply magic 0xfefefefe"
}

// A remote NBD server that negotiates and then answers every request
// with garbage: a one-shot verb fails at once, saying the server broke
// the protocol, instead of redialling it for a minute; and it says so
// once, in its error message as cryptsetup would word it, with no log
// line from the NBD client before it.
func TestNBDRemoteProtocolViolation(t *testing.T) {
	uri, violation := lyingNBD(t)
	bin := testtool.Luksd(t) // built before the clock starts
	cases := []struct {
		args []string
		code int
		want []string // stderr's lines
	}{
		{[]string{"luksDump", uri}, exitParams, []string{ // the reason, then the verdict
			"Cannot read device " + uri + ": " + violation + ".",
			"Device " + uri + " is not a valid LUKS device."}},
		{[]string{"luksUUID", uri}, exitParams, []string{"Cannot read device " + uri + ": " + violation + "."}},
		{[]string{"copy", uri, filepath.Join(t.TempDir(), "copy")}, exitDevice, []string{"Cannot read device: " + violation}},
	}
	for _, tc := range cases {
		start := time.Now()
		r := runTool(t, nil, bin, tc.args...)
		took := time.Since(start)
		t.Logf("%s: exit %d after %v: %s", tc.args[0], r.code, took.Round(time.Millisecond), r.stderr)
		if got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); r.code != tc.code || !slices.Equal(got, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and stderr %q", tc.args[0], r.code, got, tc.code, tc.want)
		}
		if took > 5*time.Second {
			t.Errorf("%s failed after %v, want at once", tc.args[0], took.Round(time.Millisecond))
		}
	}
}

// A process that serves a volume logs what its remote volumes log to the
// daemon's log (logInDaemon): the header of a volume reencrypted online
// is opened there. Before, the verb's error says it all.
func TestRemoteLogInDaemon(t *testing.T) {
	uri, violation := lyingNBD(t)
	var log daemontest.LogBuffer
	daemon.Log.SetOutput(&log)
	saved := remoteLogf
	t.Cleanup(func() { daemon.Log.SetOutput(os.Stderr); remoteLogf = saved })
	read := func() {
		t.Helper()
		f, _, err := openRemote(uri, false)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(make([]byte, 4096), 0); err == nil || !strings.Contains(err.Error(), violation) {
			t.Fatalf("read from a server that broke the protocol: %v, want an error naming %q", err, violation)
		}
	}
	remoteLogf = nil // a one-shot verb
	read()
	if s := log.String(); s != "" {
		t.Fatalf("a one-shot verb's remote volume logged %q", s)
	}
	logInDaemon()
	read()
	if s := log.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "nbd: server ") || !strings.Contains(s, "bad reply magic 0xfefefefe") {
		t.Fatalf("the daemon's log: %q, want one line of the NBD client's naming the bad reply magic", s)
	}
}
