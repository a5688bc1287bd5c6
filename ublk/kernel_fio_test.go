package ublk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// fileDevice is a blockdev.Device on a regular file.
type fileDevice struct{ *os.File }

func (f fileDevice) Size() int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

func (f fileDevice) Flush() error { return f.Sync() }

func newFileDevice(t *testing.T, size int64) fileDevice {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "backing"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return fileDevice{f}
}

// fio writes 4 KiB blocks at random with crc32c in each, 32 in flight, then
// reads everything back and checks it: concurrency on every queue, in both
// data copy modes and both ways of serving.
func TestKernelFioVerify(t *testing.T) {
	needKernel(t)
	fio := testtool.Need(t, "fio")
	for _, mode := range []Options{{}, {CopyMode: true}, {Workers: true}} {
		t.Run(fmt.Sprintf("copy=%v,workers=%v", mode.CopyMode, mode.Workers), func(t *testing.T) {
			d := startDevice(t, newFileDevice(t, 64<<20), mode)
			defer d.Stop()
			out, err := exec.Command(fio, "--name=verify", "--filename="+d.Path(), "--ioengine=libaio",
				"--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=32M",
				"--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--randseed=7").CombinedOutput()
			if err != nil {
				t.Fatalf("fio: %v\n%s", err, out)
			}
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestKernelSpeed prints 4 KiB random read IOPS at iodepth 32 for each way
// of serving, on a file-backed device; a measurement, run when
// UBLK_SPEED_SECONDS is set.
func TestKernelSpeed(t *testing.T) {
	secs := os.Getenv("UBLK_SPEED_SECONDS")
	if secs == "" {
		t.Skip("set UBLK_SPEED_SECONDS to measure")
	}
	needKernel(t)
	fio := testtool.Need(t, "fio")
	for _, mode := range []Options{{}, {CopyMode: true}, {Workers: true}, {Workers: true, CopyMode: true}} {
		d := startDevice(t, newFileDevice(t, 128<<20), mode)
		for _, rw := range []string{"randread", "randwrite"} {
			out, err := exec.Command(fio, "--name=speed", "--filename="+d.Path(), "--ioengine=libaio",
				"--direct=1", "--rw="+rw, "--bs=4k", "--iodepth=32", "--runtime="+secs, "--time_based",
				"--output-format=terse", "--terse-version=3").CombinedOutput()
			if err != nil {
				t.Fatalf("fio: %v\n%s", err, out)
			}
			f := strings.Split(strings.TrimSpace(string(out)), ";")
			idx := 7
			if rw == "randwrite" {
				idx = 48
			}
			iops, _ := strconv.Atoi(f[idx])
			t.Logf("copy=%v workers=%v %s 4k qd32: %d IOPS", mode.CopyMode, mode.Workers, rw, iops)
		}
		d.Stop()
	}
}
