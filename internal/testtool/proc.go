package testtool

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ProcStatusKiB returns a "... kB" field of /proc/self/status (VmLck,
// VmHWM) in KiB.
func ProcStatusKiB(t testing.TB, field string) int64 {
	t.Helper()
	return procStatusKiB(t, "self", field)
}

// ProcStatusKiBOf is ProcStatusKiB of process pid (a daemon under test).
func ProcStatusKiBOf(t testing.TB, pid int, field string) int64 {
	t.Helper()
	return procStatusKiB(t, strconv.Itoa(pid), field)
}

func procStatusKiB(t testing.TB, proc, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// OpenPTY returns a new pseudo-terminal's master and slave ends; without
// /dev/ptmx the test is skipped (failed in CI).
func OpenPTY(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		Missing(t, "no /dev/ptmx: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
