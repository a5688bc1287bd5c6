package argon2

import (
	"os"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// peakRSS returns the process's peak resident set size (VmHWM) in KiB.
func peakRSS(t *testing.T) int64 { return testtool.ProcStatusKiB(t, "VmHWM") }

// TestKeysInARowHoldOneMemory checks that Key's memory is gone when it
// returns: three 64 MiB derivations in a row, as a calibration runs them,
// raise the peak RSS by one 64 MiB, not more (x/crypto/argon2's heap
// allocations left two alive until the collector ran).
func TestKeysInARowHoldOneMemory(t *testing.T) {
	const memoryKiB = 64 << 10
	// Writing 5 to clear_refs resets the peak to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("cannot reset the peak RSS: %v", err)
	}
	base := peakRSS(t)
	for range 3 {
		if _, err := Key(Argon2id, []byte("pw"), []byte("saltsalt"), 1, memoryKiB, 2, 32); err != nil {
			t.Fatal(err)
		}
	}
	grew := peakRSS(t) - base
	if grew < memoryKiB*9/10 || grew > memoryKiB*5/4 {
		t.Errorf("three %d KiB derivations in a row raised the peak RSS by %d KiB, want about %d", memoryKiB, grew, memoryKiB)
	}
}
