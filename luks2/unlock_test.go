package luks2

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestUnlockOrderLikeCryptsetup: keyslots are tried in the metadata's
// order within a priority, and a failed unlock is a wrong passphrase or
// "no usable keyslot" exactly where cryptsetup says so (exit 2 or 1).
func TestUnlockOrderLikeCryptsetup(t *testing.T) {
	pass := []byte("same")
	kf := testtool.KeyFile(t, pass)
	pb := cryptsetupPBKDFArgs(cheapPBKDF2)

	// Keyslot 1 made first, then 0 with the same passphrase: the metadata
	// lists 1 before 0, and both tools open keyslot 1.
	img := testtool.Image(t, 20<<20)
	cryptsetup(t, append(append([]string{"luksFormat", "-q", "--type", "luks2", "-S", "1", "--key-file", kf}, pb...), img)...)
	cryptsetup(t, append(append([]string{"luksAddKey", "-q", "-S", "0", "--key-file", kf}, pb...), img, kf)...)
	h, f := readHdr(t, img)
	if _, slot, err := h.Unlock(f, pass, -1); err != nil || slot != 1 {
		t.Fatalf("Unlock: slot %d, %v; want 1 (listed first)", slot, err)
	}
	if s := opensSlot(t, img, pass); s != 1 {
		t.Fatalf("cryptsetup opens slot %d, want 1", s)
	}

	// A bound keyslot 0 and an unbound keyslot 1 under each priority setting.
	for _, prio := range [][2]string{{"", ""}, {"0", "prefer"}, {"1", "prefer"}, {"0", "ignore"}, {"1", "ignore"}} {
		t.Run(prio[1]+prio[0], func(t *testing.T) {
			img := testtool.Image(t, 20<<20)
			cryptsetup(t, append(append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", kf}, pb...), img)...)
			cryptsetup(t, append(append([]string{"luksAddKey", "-q", "--unbound", "-s", "256"}, pb...), img, testtool.KeyFile(t, []byte("unbound")))...)
			if prio[0] != "" {
				cryptsetup(t, "config", "--priority", prio[1], "-S", prio[0], img)
			}
			h, f := readHdr(t, img)
			for _, try := range []struct {
				p       string
				unbound bool
			}{{"same", false}, {"unbound", false}, {"wrong", false}, {"same", true}, {"unbound", true}, {"wrong", true}} {
				p := try.p
				unlock, args := h.Unlock, []string{"open", "--test-passphrase", "-v"}
				if try.unbound {
					unlock, args = h.UnlockUnbound, append(args, "--unbound")
				}
				_, slot, err := unlock(f, []byte(p), -1)
				code := 0
				switch {
				case errors.Is(err, ErrWrongPassphrase):
					code = 2
				case errors.Is(err, ErrNoUsableKeyslot):
					code = 1
				case err != nil:
					t.Fatalf("%s: %v", p, err)
				}
				out, csErr := testtool.Output(t, "cryptsetup", append(args, "--key-file", testtool.KeyFile(t, []byte(p)), img)...)
				csCode := 0
				var ee *exec.ExitError
				if errors.As(csErr, &ee) {
					csCode = ee.ExitCode()
				}
				if code != csCode || code == 0 && !strings.Contains(out, fmt.Sprintf("Key slot %d unlocked.", slot)) {
					t.Fatalf("passphrase %q (unbound %v): luksd %d (slot %d, %v), cryptsetup exit %d: %s", p, try.unbound, code, slot, err, csCode, out)
				}
				t.Logf("passphrase %q (unbound %v): exit %d", p, try.unbound, code)
			}
		})
	}
}
