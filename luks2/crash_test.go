package luks2

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// Crash points: every header-editing operation runs on a devtest.Recorder,
// and every image a power cut may leave is rebuilt (devtest's PowerCuts:
// what was flushed, and any subset of the writes issued since). Each such image must open with the old key set or
// with the new one, and a key the operation does not remove must open in
// every one. cryptsetup reads the same images (each distinct one once).

// crashDevSize is the size of the small volumes the crash tests edit: 32 KiB
// of metadata, a 1 MiB keyslots area (eight 32-byte keys' areas), data from
// 2 MiB.
const crashDevSize = 3 << 20

// crashSubsetLimit: epochs of up to this many writes are cut in every
// subset of them.
const crashSubsetLimit = 8

var crashFormat = FormatOptions{Cipher: "aes-xts-plain64", KeySize: 32, MetadataSize: 16 << 10,
	KeyslotsSize: 1 << 20, PBKDF: cheapPBKDF2, Keyslot: 0}

// crashVolume is a volume under test: its device and what its passphrases
// open.
type crashVolume struct {
	dev  *devtest.Mem
	h    *Header
	keys map[string][]byte // passphrase -> the key it opens
}

func newCrashVolume(t *testing.T, version int) *crashVolume {
	t.Helper()
	opts := crashFormat
	opts.Version = version
	if version == 1 {
		opts.MetadataSize, opts.KeyslotsSize = 0, 0
	}
	dev := devtest.NewMem(crashDevSize)
	h, vk, err := Format(dev, crashDevSize, opts, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	v := &crashVolume{dev: dev, h: h, keys: map[string][]byte{"first": vk}}
	v.add(t, "second", -1)
	return v
}

// add adds a passphrase for the volume key.
func (v *crashVolume) add(t *testing.T, pass string, slot int) {
	t.Helper()
	if _, err := v.h.AddKey(v.dev, v.keys["first"], []byte(pass), slot, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	v.keys[pass] = v.keys["first"]
}

// crashOp is one edit: it runs on dev (the recorder) with the header read
// from it, and returns the key set after it.
type crashOp struct {
	name    string
	version int
	// prepare adds what the edit needs to the volume before recording.
	prepare func(t *testing.T, v *crashVolume)
	run     func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte
	// vanish: the edit destroys the old volume (luksFormat): a crash may
	// leave it half wiped or no LUKS header at all, but a header of the
	// new volume (formattedUUID) opens with the new keys.
	vanish bool
}

// without returns keys less the named passphrases.
func without(keys map[string][]byte, gone ...string) map[string][]byte {
	out := map[string][]byte{}
	for p, k := range keys {
		out[p] = k
	}
	for _, g := range gone {
		delete(out, g)
	}
	return out
}

// with returns keys plus pass opening key.
func with(keys map[string][]byte, pass string, key []byte) map[string][]byte {
	out := without(keys)
	out[pass] = key
	return out
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// formattedUUID is the UUID of the volume the format crash test makes.
const formattedUUID = "0badcafe-0000-4000-8000-00000000f0f0"

func crashOps() []crashOp {
	return append(append(versionCrashOps(2), versionCrashOps(1)...), luks2CrashOps()...)
}

// versionCrashOps are the operations both LUKS versions have.
func versionCrashOps(version int) []crashOp {
	newKey := bytes.Repeat([]byte{0x5a}, 32)
	return []crashOp{
		crashOp{name: "format", version: version, vanish: true,
			run: func(t *testing.T, _ *Header, dev Device, _ map[string][]byte) map[string][]byte {
				opts := crashFormat
				opts.Version = version
				opts.VolumeKey = newKey
				opts.UUID = formattedUUID
				if version == 1 {
					opts.MetadataSize, opts.KeyslotsSize = 0, 0
				}
				_, vk, err := Format(dev, crashDevSize, opts, []byte("formatted"))
				mustNil(t, err)
				return map[string][]byte{"formatted": vk}
			}},
		crashOp{name: "add key", version: version,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				_, err := h.AddKey(dev, keys["first"], []byte("added"), -1, cheapPBKDF2)
				mustNil(t, err)
				return with(keys, "added", keys["first"])
			}},
		crashOp{name: "kill slot", version: version,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.KillSlot(dev, 1))
				return without(keys, "second")
			}},
		crashOp{name: "change key", version: version,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				if version == 2 {
					mustNil(t, h.ChangeKey(dev, 1, keys["second"], []byte("changed"), cheapPBKDF2))
				} else {
					// cryptsetup's LUKS1 luksChangeKey (luksd's moveKey):
					// the new passphrase in the first free slot, then the
					// old slot killed.
					_, err := h.AddKey(dev, keys["second"], []byte("changed"), -1, cheapPBKDF2)
					mustNil(t, err)
					mustNil(t, h.KillSlot(dev, 1))
				}
				return with(without(keys, "second"), "changed", keys["second"])
			}},
		crashOp{name: "uuid", version: version,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.SetUUID(dev, "12345678-9abc-def0-1234-56789abcdef0"))
				return keys
			}},
		crashOp{name: "erase", version: version,
			prepare: func(t *testing.T, v *crashVolume) {
				if version == 2 {
					key := bytes.Repeat([]byte{0x11}, 16)
					_, err := v.h.AddUnboundKey(v.dev, key, []byte("unbound"), -1, cheapPBKDF2)
					mustNil(t, err)
					v.keys["unbound"] = key
				}
			},
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				for _, s := range h.ActiveKeyslots() {
					if !h.Unbound(s) {
						mustNil(t, h.KillSlot(dev, s))
					}
				}
				return without(keys, "first", "second")
			}},
		restoreOp(version),
	}
}

// luks2CrashOps are the operations only LUKS2 has.
func luks2CrashOps() []crashOp {
	return []crashOp{
		crashOp{name: "add unbound key", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				key := bytes.Repeat([]byte{0x22}, 24)
				_, err := h.AddUnboundKey(dev, key, []byte("unbound"), -1, cheapPBKDF2)
				mustNil(t, err)
				return with(keys, "unbound", key)
			}},
		crashOp{name: "change key in place", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.ConvertKey(dev, 1, keys["second"], []byte("changed"), cheapArgon2id, true))
				return with(without(keys, "second"), "changed", keys["second"])
			}},
		crashOp{name: "convert key", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.ConvertKey(dev, 1, keys["second"], []byte("second"), cheapArgon2id, false))
				return keys
			}},
		crashOp{name: "convert key in place", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.ConvertKey(dev, 0, keys["first"], []byte("first"), cheapArgon2id, true))
				return keys
			}},
		crashOp{name: "label", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				label, sub := "crash", "test"
				mustNil(t, h.SetLabel(dev, &label, &sub))
				return keys
			}},
		crashOp{name: "priority", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.SetPriority(dev, 1, PriorityPrefer))
				return keys
			}},
		crashOp{name: "token add", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				id, err := h.SetToken(dev, -1, KeyringTokenJSON("crash"), false)
				mustNil(t, err)
				mustNil(t, h.AssignToken(dev, id, -1))
				return keys
			}},
		crashOp{name: "token import", version: 2,
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				_, err := h.SetToken(dev, 3, []byte(`{"type":"x-crash","keyslots":["1"],"n":[1,2]}`), false)
				mustNil(t, err)
				return keys
			}},
		crashOp{name: "token remove and unassign", version: 2,
			prepare: func(t *testing.T, v *crashVolume) {
				_, err := v.h.SetToken(v.dev, 0, []byte(`{"type":"x-crash","keyslots":["0","1"]}`), false)
				mustNil(t, err)
				_, err = v.h.SetToken(v.dev, 1, []byte(`{"type":"x-crash","keyslots":[]}`), false)
				mustNil(t, err)
			},
			run: func(t *testing.T, h *Header, dev Device, keys map[string][]byte) map[string][]byte {
				mustNil(t, h.UnassignToken(dev, 0, 1))
				mustNil(t, h.RemoveToken(dev, 1))
				return keys
			}},
	}
}

// restoreOp restores a backup taken before "second" was changed to
// "changed" (its key material moved to another area) and "third" added.
func restoreOp(version int) crashOp {
	var backup []byte
	return crashOp{name: "header restore", version: version,
		prepare: func(t *testing.T, v *crashVolume) {
			var b bytes.Buffer
			mustNil(t, Backup(v.dev, crashDevSize, &b))
			backup = b.Bytes()
			if version == 2 {
				mustNil(t, v.h.ChangeKey(v.dev, 1, v.keys["second"], []byte("changed"), cheapPBKDF2))
			} else {
				_, err := v.h.AddKey(v.dev, v.keys["second"], []byte("changed"), -1, cheapPBKDF2)
				mustNil(t, err)
				mustNil(t, v.h.KillSlot(v.dev, 1))
			}
			v.keys = with(without(v.keys, "second"), "changed", v.keys["first"])
			v.add(t, "third", -1)
		},
		run: func(t *testing.T, _ *Header, dev Device, keys map[string][]byte) map[string][]byte {
			mustNil(t, Restore(dev, crashDevSize, bytes.NewReader(backup), int64(len(backup))))
			return map[string][]byte{"first": keys["first"], "second": keys["first"]}
		}}
}

// opensWith reports which of keys' passphrases open img (each must give
// its own key), and img's UUID.
func opensWith(img []byte, keys map[string][]byte) (map[string]bool, string, error) {
	h, err := Read(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		return nil, "", err
	}
	out := map[string]bool{}
	for p, want := range keys {
		k, _, err := h.UnlockUnbound(bytes.NewReader(img), []byte(p), -1)
		out[p] = err == nil && bytes.Equal(k, want)
	}
	return out, h.UUID(), nil
}

func TestCrashPoints(t *testing.T) {
	var images []crashImage
	for _, op := range crashOps() {
		t.Run(fmt.Sprintf("LUKS%d %s", op.version, op.name), func(t *testing.T) {
			images = append(images, checkCrashPoints(t, op)...)
		})
	}
	t.Logf("%d distinct power-cut images of %d operations, each opened by luksd and cryptsetup", len(images), len(crashOps()))
	t.Run("cryptsetup", func(t *testing.T) { crossCheckCrashImages(t, images) })
}

// crashImage is a distinct crash image and what must open it.
type crashImage struct {
	what      string
	img       []byte
	old, new  map[string][]byte
	vanish    bool
	luksdOpen map[string]bool // what opened it in luksd (nil: not LUKS)
}

func checkCrashPoints(t *testing.T, op crashOp) []crashImage {
	v := newCrashVolume(t, op.version)
	if op.prepare != nil {
		op.prepare(t, v)
	}
	before := v.dev.Bytes()
	rec := devtest.NewRecorder(devtest.MemOf(before))
	h, err := Read(rec, crashDevSize)
	mustNil(t, err)
	after := op.run(t, h, rec, v.keys)
	old := v.keys
	kept := map[string][]byte{}
	for p, k := range old {
		if nk, ok := after[p]; ok && bytes.Equal(nk, k) {
			kept[p] = k
		}
	}
	seen := map[[32]byte]bool{}
	var out []crashImage
	if rec.Writes() == 0 || len(rec.Ops()) == rec.Writes() {
		t.Fatalf("the operation made %d writes and %d flushes", rec.Writes(), len(rec.Ops())-rec.Writes())
	}
	rec.PowerCuts(before, crashSubsetLimit, func(cut string, img []byte) {
		sum := sha256.Sum256(img)
		if seen[sum] {
			return
		}
		seen[sum] = true
		what := fmt.Sprintf("LUKS%d %s, power cut in %s", op.version, op.name, cut)
		opened, uuid, err := opensWith(img, union(old, after))
		judged := opened
		if op.vanish && err == nil && uuid != formattedUUID {
			judged = nil // the old volume, being wiped: nothing to promise
		}
		if err := judgeCrash(judged, err, old, after, kept, op.vanish); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if err == nil {
			if err := editAfterCrash(img); err != nil {
				t.Errorf("%s: the next edit fails: %v", what, err)
			}
		}
		out = append(out, crashImage{what: what, img: append([]byte(nil), img...), old: old, new: after, vanish: op.vanish, luksdOpen: opened})
	})
	// The last image is the edit's result: the new key set opens.
	final, _, err := opensWith(rec.Persisted(before, rec.Writes()), after)
	if err != nil || !all(final, after) {
		t.Errorf("after the whole edit: opens %v (%v), want all of %v", final, err, keyNames(after))
	}
	return out
}

// editAfterCrash makes an edit (a LUKS2 label) on a copy of a power-cut
// image that opens: a copy torn by the cut is no other editor's work, so
// the edit writes over it (cryptsetup repairs it when it loads the
// header), and the edited header reads back whole.
func editAfterCrash(img []byte) error {
	dev := devtest.MemOf(bytes.Clone(img))
	h, err := Read(dev, crashDevSize)
	if err != nil || h.Version() != 2 {
		return err
	}
	label := "after the cut"
	if err := h.SetLabel(dev, &label, nil); err != nil {
		return err
	}
	if h, err = Read(dev, crashDevSize); err != nil {
		return err
	}
	if h.Damaged() {
		return errors.New("a header copy is still damaged after the edit")
	}
	return nil
}

func union(a, b map[string][]byte) map[string][]byte {
	out := without(a)
	for p, k := range b {
		out[p] = k
	}
	return out
}

func all(opened map[string]bool, keys map[string][]byte) bool {
	for p := range keys {
		if !opened[p] {
			return false
		}
	}
	return true
}

func keyNames(keys map[string][]byte) string {
	var n []string
	for p := range keys {
		n = append(n, p)
	}
	sort.Strings(n)
	return strings.Join(n, ",")
}

// judgeCrash applies the rule: every kept key opens, and the old or the new
// key set opens whole; with vanish, the new volume opens with its keys or
// is not there (opened nil).
func judgeCrash(opened map[string]bool, readErr error, old, after, kept map[string][]byte, vanish bool) error {
	switch {
	case vanish && opened == nil:
		return nil
	case vanish && !all(opened, after):
		return fmt.Errorf("the new volume's header does not open with its keys: %v", opened)
	case readErr != nil:
		return fmt.Errorf("unreadable: %v", readErr)
	}
	if !all(opened, kept) {
		return fmt.Errorf("a key the edit keeps does not open: %v (kept %s)", opened, keyNames(kept))
	}
	if !all(opened, old) && !all(opened, after) {
		return fmt.Errorf("opens %v: neither the old keys (%s) nor the new ones (%s)", opened, keyNames(old), keyNames(after))
	}
	return nil
}

// crossCheckCrashImages asks cryptsetup whether each passphrase opens each
// distinct crash image, and requires the same answers as luksd's.
func crossCheckCrashImages(t *testing.T, images []crashImage) {
	if len(images) == 0 {
		t.Fatal("no crash images")
	}
	dir := t.TempDir()
	for i, ci := range images {
		img := filepath.Join(dir, fmt.Sprintf("crash%d.img", i))
		if err := os.WriteFile(img, ci.img, 0o600); err != nil {
			t.Fatal(err)
		}
		for p := range union(ci.old, ci.new) {
			_, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--disable-locks", "--key-file", testtool.KeyFile(t, []byte(p)), img)
			cs := err == nil
			if ci.luksdOpen == nil && cs || ci.luksdOpen != nil && ci.luksdOpen[p] != cs {
				// Unbound keys do not open the volume in cryptsetup
				// without --unbound -S; compare those through luksd only.
				if ci.luksdOpen != nil && isUnboundPass(p) {
					continue
				}
				t.Errorf("%s: passphrase %q opens in cryptsetup %v, in luksd %v", ci.what, p, cs, ci.luksdOpen[p])
			}
		}
		os.Remove(img)
	}
}

func isUnboundPass(p string) bool { return p == "unbound" }

// TestEditsValidateBeforeWriting: an edit whose new header would be
// refused (PBKDF parameters out of range, a full keyslots area) writes
// nothing at all; on main, ConvertKey in place wrote the new key material
// over the only keyslot before the metadata was refused.
func TestEditsValidateBeforeWriting(t *testing.T) {
	huge := PBKDF{Type: "pbkdf2", Hash: "sha256", Iterations: 4294967300}
	hugeArgon := PBKDF{Type: "argon2id", Iterations: 1 << 33, MemoryKiB: 32, Parallel: 1}
	fatArgon := PBKDF{Type: "argon2id", Iterations: 4, MemoryKiB: 5 << 20, Parallel: 1}
	for _, tc := range []struct {
		name string
		edit func(h *Header, dev Device, vk []byte) error
	}{
		{"convert key in place", func(h *Header, dev Device, vk []byte) error {
			return h.ConvertKey(dev, 0, vk, []byte("first"), huge, true)
		}},
		{"change key", func(h *Header, dev Device, vk []byte) error {
			return h.ChangeKey(dev, 0, vk, []byte("new"), hugeArgon)
		}},
		{"add key", func(h *Header, dev Device, vk []byte) error {
			_, err := h.AddKey(dev, vk, []byte("new"), -1, fatArgon)
			return err
		}},
		{"add unbound key", func(h *Header, dev Device, vk []byte) error {
			_, err := h.AddUnboundKey(dev, vk[:16], []byte("new"), -1, huge)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newCrashVolume(t, 2)
			rec := devtest.NewRecorder(devtest.MemOf(v.dev.Bytes()))
			h, err := Read(rec, crashDevSize)
			mustNil(t, err)
			if err := tc.edit(h, rec, v.keys["first"]); !errors.Is(err, ErrPBKDF) {
				t.Fatalf("edit: %v, want ErrPBKDF", err)
			}
			if rec.Writes() != 0 {
				t.Fatalf("a refused edit made %d writes", rec.Writes())
			}
		})
	}
}
