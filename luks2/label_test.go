package luks2

import (
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestLongLabelTruncatedLikeCryptsetup: cryptsetup cuts a label or
// subsystem to the 47 bytes the binary header holds, at format and in
// config; luksd does the same, and cryptsetup reads back what it would
// have written itself.
func TestLongLabelTruncatedLikeCryptsetup(t *testing.T) {
	pass := []byte("label")
	long := strings.Repeat("L", 60)
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2, Label: long, Subsystem: long}, pass)
	if err != nil {
		t.Fatalf("format with a 60-byte label: %v", err)
	}
	if h.Label() != long[:47] || h.Subsystem() != long[:47] {
		t.Fatalf("label %q subsystem %q, want the first 47 bytes", h.Label(), h.Subsystem())
	}
	out := cryptsetup(t, "luksDump", img)
	if !strings.Contains(out, "Label:         \t"+long[:47]+"\n") {
		t.Fatalf("cryptsetup does not see the truncated label:\n%s", out)
	}
	other := strings.Repeat("o", 50)
	if err := h.SetLabel(f, &other, nil); err != nil {
		t.Fatalf("SetLabel with a 50-byte label: %v", err)
	}
	if out := cryptsetup(t, "luksDump", img); !strings.Contains(out, "Label:         \t"+other[:47]+"\n") {
		t.Fatalf("cryptsetup does not see the changed label:\n%s", out)
	}
}
