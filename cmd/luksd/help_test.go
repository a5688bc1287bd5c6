package main

import (
	"strings"
	"testing"
)

// TestHelpAndNearestAction: --help ends with cryptsetup's compiled-in
// defaults block and luksd's own; a mistyped verb gets a suggestion, a
// word far from every verb cryptsetup's bare "Unknown action.".
func TestHelpAndNearestAction(t *testing.T) {
	r := luksd(t, nil, "--help")
	for _, want := range []string{"Default compiled-in metadata format is LUKS2 (for luksFormat action).",
		"\tMaximum keyfile size: 8192kB, Maximum interactive passphrase length 512 (characters)\n",
		"\tLUKS: aes-xts-plain64, Key: 256 bits, LUKS header hashing: sha256, RNG: /dev/urandom\n",
		"open --frontend auto: ublk where ublk_drv loads, else nbd"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("--help (exit %d) lacks %q", r.code, want)
		}
	}
	luksd(t, nil, "opne", "x", "y").expect(t, exitParams, "Unknown action. Did you mean open?")
	luksd(t, nil, "lukFormat", "x").expect(t, exitParams, "Unknown action. Did you mean luksFormat?")
	luksd(t, nil, "luksdump", "x").expect(t, exitParams, "Unknown action. Did you mean luksDump?")
	if r := luksd(t, nil, "frobnicate", "x"); r.code != exitParams || strings.TrimSpace(r.stderr) != "Unknown action." {
		t.Errorf("frobnicate: exit %d %q", r.code, r.stderr)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d", d)
	}
}
