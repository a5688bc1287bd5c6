package testtool

import (
	"os"
	"testing"
	"unsafe"
)

// NeedKernel skips a test that drives a real kernel block device unless it
// runs as root and available reports the driver loaded. Such tests run in
// the VM suite (contrib/vmtest), which fails a skip; this machine and CI
// have no nbd.ko or ublk_drv, so here they skip even in CI.
func NeedKernel(t testing.TB, driver string, available func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("SKIP (not a pass): the %s kernel tests need root", driver)
	}
	if err := available(); err != nil {
		t.Skipf("SKIP (not a pass): %v; the %s kernel tests run in the VM suite", err, driver)
	}
}

// AlignedBuffer returns n zero bytes starting on a 4096-byte boundary, as
// O_DIRECT reads and writes need.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off : off+n]
}
