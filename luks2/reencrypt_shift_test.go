package luks2

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// shiftSteps describes root's data and backup segments ("offset+size
// @iv_tweak flags", sizes and offsets in MiB) and the segments each
// volume key's digest is bound to.
func shiftSteps(root *node) string {
	var b strings.Builder
	mib := func(s string) string {
		if s == "dynamic" {
			return "dyn"
		}
		var n uint64
		fmt.Sscan(s, &n)
		return fmt.Sprint(n >> 20)
	}
	segs := root.get("segments")
	for i, k := range segs.keys {
		s := segs.vals[i]
		var flags []string
		if f := s.get("flags"); f != nil {
			for _, v := range f.vals {
				flags = append(flags, v.str)
			}
		}
		fmt.Fprintf(&b, "%s:%s+%s@%s%v ", k, mib(s.get("offset").str), mib(s.get("size").str), s.get("iv_tweak").str, flags)
	}
	digests := root.get("digests")
	for i, k := range digests.keys {
		var ids []string
		for _, v := range digests.vals[i].get("segments").vals {
			ids = append(ids, v.str)
		}
		if len(ids) > 0 {
			fmt.Fprintf(&b, "d%s%v ", k, ids)
		}
	}
	return strings.TrimSpace(b.String())
}

// reencrypt --reduce-device-size 1M on 4 MiB of data, marked by
// cryptsetup: luksd's steps write the segments and digest bindings
// cryptsetup's do (as seen in cryptsetup 2.6.1's header writes), its
// last header is cryptsetup's to the byte but for salts and digests,
// and the data, moved 1 MiB on, reads back under the new key.
func TestReencryptShiftStepsLikeCryptsetup(t *testing.T) {
	const shift = 1 << 20
	img, key := reencImage(t)
	plain := dataWith(t, img, cryptsetupVolumeKey(t, img, key), 0)
	cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--init-only", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--reduce-device-size", fmt.Sprint(shift), "--key-file", key, img)
	theirs := copyImage(t, img)
	cryptsetup(t, "reencrypt", "-q", "--force-offline-reencrypt", "--resume-only", "--key-file", key, theirs)

	h, f := readHdr(t, img)
	var steps []string
	run := ReencryptRun{Commit: func(write func() error) error {
		if err := write(); err != nil {
			return err
		}
		again, err := Read(f, f.Size())
		if err != nil {
			return err
		}
		if v2, ok := again.v2(); ok && again.InReencryption() {
			steps = append(steps, shiftSteps(v2.meta.root))
		}
		return nil
	}}
	mustNil(t, h.Reencrypt(f, f.Size(), []byte("pw"), -1, run))
	want := []string{
		// The old data at 16 MiB, the new at 17 MiB; 3 MiB of data left.
		"0:16+2@0[] 1:19+1@4096[in-reencryption] 2:16+dyn@0[backup-previous] 3:17+dyn@0[backup-final] d0[1 0 2] d1[1 3]",
		"0:16+2@0[] 1:19+dyn@4096[] 2:16+dyn@0[backup-previous] 3:17+dyn@0[backup-final] d0[0 2] d1[1 3]",
		"0:16+1@0[] 1:18+1@2048[in-reencryption] 2:19+dyn@4096[] 3:16+dyn@0[backup-previous] 4:17+dyn@0[backup-final] d0[1 0 3] d1[1 2 4]",
		"0:16+1@0[] 1:18+dyn@2048[] 2:16+dyn@0[backup-previous] 3:17+dyn@0[backup-final] d0[0 2] d1[1 3]",
		"0:17+1@0[in-reencryption] 1:18+dyn@2048[] 2:16+dyn@0[backup-previous] 3:17+dyn@0[backup-final] d0[0 2] d1[0 1 3]",
		"0:17+dyn@0[] 1:16+dyn@0[backup-previous] 2:17+dyn@0[backup-final] d0[1] d1[0 2]",
	}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
	if a, b := saltless(t, theirs), saltless(t, img); a != b {
		t.Fatalf("end:\ncryptsetup %s\nluksd      %s", a, b)
	}
	if got := dataWith(t, img, cryptsetupVolumeKey(t, img, key), 0); !bytes.Equal(got, plain[:len(plain)-shift]) {
		t.Fatalf("data differs at %d", firstDifference(got, plain))
	}
}
