package luks2

import (
	"os"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// TestCalibrationPeakMemoryIsTheKeyslots runs the real argon2
// calibration and checks that its peak RSS is one derivation's memory: it
// grows by at most 1.1x the largest memory a run used (luksd once kept a
// second buffer alive, and measured the full memory first: 1 GiB held to
// make a 300 MiB keyslot). That the largest run is within 1.1x of the
// keyslot's memory is TestCalibrateArgon2GrowsMemoryFromBelow's, on cost
// models: on a real, shared machine a noisy sample may overshoot and be
// scaled back, so here the ratio is only logged.
func TestCalibrationPeakMemoryIsTheKeyslots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs argon2 for about a second of CPU")
	}
	largest := 0
	real := measureKDF
	measureKDF = func(p kdfParams, keyLen int) time.Duration {
		largest = max(largest, p.memory)
		return real(p, keyLen)
	}
	t.Cleanup(func() { measureKDF = real })
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
	t.Logf("calibrated time cost %d, memory %d KiB; largest run %d KiB (%.2fx); peak RSS grew %d KiB",
		p.Iterations, p.MemoryKiB, largest, float64(largest)/float64(p.MemoryKiB), grew)
	// 4 MiB for the runtime's own growth beside the blocks.
	if limit := int64(largest)*11/10 + 4<<10; grew > limit {
		t.Fatalf("runs of at most %d KiB raised the peak RSS by %d KiB, more than 1.1x: a buffer outlived its run", largest, grew)
	}
}
