package luks2

import (
	"os"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// TestCalibrationPeakMemoryIsTheKeyslots runs the real argon2
// calibration and checks the issue #17 goal: the process's peak RSS
// grows by at most 1.1x the memory the keyslot gets (luksd measured the
// full memory first and held 1 GiB to make a 300 MiB keyslot). The target
// is short, so the memory lands below the maximum on most machines; on one
// fast enough to reach it, the bound holds all the more.
func TestCalibrationPeakMemoryIsTheKeyslots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs argon2 for about a second of CPU")
	}
	// Writing 5 to clear_refs resets the peak to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("cannot reset the peak RSS: %v", err)
	}
	base := testtool.ProcStatusKiB(t, "VmHWM")
	p, err := Calibrate(PBKDF{Type: "argon2id", MemoryKiB: 256 << 10, Parallel: 2, IterTime: 150 * time.Millisecond}, 64)
	if err != nil {
		t.Fatal(err)
	}
	grew := testtool.ProcStatusKiB(t, "VmHWM") - base
	t.Logf("calibrated time cost %d, memory %d KiB; peak RSS grew %d KiB", p.Iterations, p.MemoryKiB, grew)
	// 4 MiB for the runtime's own growth beside the blocks.
	if limit := int64(p.MemoryKiB)*11/10 + 4<<10; grew > limit {
		t.Fatalf("calibrating %d KiB raised the peak RSS by %d KiB, more than 1.1x", p.MemoryKiB, grew)
	}
}
