package argon2

import (
	"bytes"
	"os"
	"strconv"
	"testing"
)

// peakRSS returns the process's peak resident set size (VmHWM) in KiB.
func peakRSS(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(status) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmHWM:" {
			kib, err := strconv.Atoi(string(f[1]))
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

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
