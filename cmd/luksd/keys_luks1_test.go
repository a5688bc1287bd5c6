package main

import (
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Key management like cryptsetup's: the same command lines run through
// cryptsetup on one image and through luksd on its twin, and must give
// the same exit codes, -v output, error text and keyslot layout.

// twin holds two images formatted alike by cryptsetup, one per tool.
type twin struct {
	w        *workspace
	cs, mine string
}

// newTwin has cryptsetup format two images with formatArgs and key.
func newTwin(w *workspace, key string, formatArgs ...string) *twin {
	w.t.Helper()
	tw := &twin{w: w, cs: w.image("cs.img"), mine: w.image("luksd.img")}
	for _, img := range []string{tw.cs, tw.mine} {
		w.cs(nil, append(append([]string{"luksFormat", "-q"}, formatArgs...), img, key)...).ok(w.t)
	}
	return tw
}

// run runs args (IMG stands for the image) through both tools and compares.
func (tw *twin) run(stdin string, args ...string) result {
	t := tw.w.t
	t.Helper()
	with := func(img string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.ReplaceAll(a, "IMG", img)
		}
		return out
	}
	var in []byte
	if stdin != "" {
		in = []byte(stdin)
	}
	want := tw.w.cs(in, with(tw.cs)...)
	got := tw.w.luksd(in, with(tw.mine)...)
	want.stderr = strings.ReplaceAll(want.stderr, tw.cs, "IMG")
	got.stderr = strings.ReplaceAll(got.stderr, tw.mine, "IMG")
	want.stdout = strings.ReplaceAll(want.stdout, tw.cs, "IMG")
	got.stdout = strings.ReplaceAll(got.stdout, tw.mine, "IMG")
	if got.code != want.code {
		t.Fatalf("%v: luksd exit %d (%q), cryptsetup exit %d (%q)", args, got.code, got.stderr, want.code, want.stderr)
	}
	if got.stdout != want.stdout {
		t.Fatalf("%v: stdout differs:\n--- cryptsetup\n%s--- luksd\n%s", args, want.stdout, got.stdout)
	}
	if got.code != 0 {
		// cryptsetup may add a second line ("Failed to set pbkdf parameters.")
		// or say nothing (a wrong passphrase in luksAddKey on LUKS1), where
		// luksd says what LUKS2 gets.
		// Both may be silent (luksUUID, isLuks).
		msg, theirs := strings.TrimSpace(got.stderr), strings.TrimSpace(want.stderr)
		if msg == "" && theirs != "" || strings.Contains(msg, "\n") || theirs != "" && !strings.Contains(theirs, msg) {
			t.Fatalf("%v: luksd says %q, cryptsetup %q", args, got.stderr, want.stderr)
		}
	}
	tw.sameSlots()
	return got
}

// slotLines are the luksDump lines that do not depend on random salts,
// keys or UUIDs.
var slotLines = regexp.MustCompile(`(?m)^(Key Slot \d+: \w+|\tIterations: .*|\tKey material offset:.*|  \d+: luks2.*|\tPriority: .*|\tKey: .*|\tCipher.*|\tArea .*|\tDigest ID: .*|Version: .*|Hash spec: .*|MK bits: .*|Label: .*)$`)

// sameSlots compares the keyslot layouts of both images in cryptsetup's luksDump.
func (tw *twin) sameSlots() {
	tw.w.t.Helper()
	a := slotLines.FindAllString(tw.w.cs(nil, "luksDump", tw.cs).ok(tw.w.t).stdout, -1)
	b := slotLines.FindAllString(tw.w.cs(nil, "luksDump", tw.mine).ok(tw.w.t).stdout, -1)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		tw.w.t.Fatalf("keyslots differ:\n--- cryptsetup's edits\n%s\n--- luksd's edits\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// dumpVolumeKey writes the volume key of img (opened with key) into a file.
func (w *workspace) dumpVolumeKey(name, img, key string) string {
	w.t.Helper()
	vk, err := hex.DecodeString(volumeKey(w.t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, img).ok(w.t).stdout))
	if err != nil {
		w.t.Fatal(err)
	}
	p := w.path(name)
	if err := os.WriteFile(p, vk, 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

func TestInteropLUKS1KeysLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	k := func(n string) string { return w.key("k"+n, "pass "+n) }
	k0, k1, k2, k3, k4, k5 := k("0"), k("1"), k("2"), k("3"), k("4"), k("5")
	bad := w.key("bad", "wrong")
	tw := newTwin(w, k0, "--type", "luks1", "--pbkdf-force-iterations", "1000")
	it := []string{"--pbkdf-force-iterations", "1000"}
	add := func(extra ...string) []string { return append(append([]string{"luksAddKey", "-v"}, it...), extra...) }

	tw.run("", add("-d", k0, "IMG", k1)...)
	tw.run("", add("-d", k0, "-S", "5", "IMG", k2)...)
	tw.run("", add("-d", k0, "--new-key-slot", "3", "IMG", k3)...)
	// Refusals, each before anything is written.
	tw.run("", "luksAddKey", "-v", "-d", k0, "--pbkdf", "argon2id", "IMG", k4)
	tw.run("", "luksAddKey", "-v", "-d", k0, "--pbkdf", "argon2i", "IMG", k4)
	tw.run("", "luksAddKey", "-v", "-d", k0, "--pbkdf-force-iterations", "999", "IMG", k4)
	tw.run("", add("-d", k0, "-S", "8", "IMG", k4)...)
	tw.run("", add("-d", k0, "-S", "1", "IMG", k4)...)
	tw.run("", add("-d", bad, "IMG", k4)...)
	tw.run("", add("--unbound", "-s", "256", "IMG", k4)...)
	tw.run("", "luksChangeKey", "-v", "-d", k0, "--pbkdf", "argon2id", "IMG", k4)
	tw.run("", "config", "--priority", "prefer", "-S", "0", "IMG")

	// luksChangeKey moves the passphrase to the first free keyslot; with
	// --key-slot it stays where it was.
	tw.run("", append([]string{"luksChangeKey", "-v", "-d", k1, "IMG", k4}, it...)...)
	tw.run("", append([]string{"luksChangeKey", "-v", "-S", "5", "-d", k2, "IMG", k5}, it...)...)
	tw.run("", "luksRemoveKey", "-v", "-d", k4, "IMG")
	tw.run("", "luksKillSlot", "-v", "-d", k0, "IMG", "3")
	tw.run("", "luksKillSlot", "-v", "-q", "IMG", "3")
	tw.run("", "luksKillSlot", "-v", "-q", "IMG", "9")

	// Fill every keyslot, then change a passphrase in place.
	for i := 0; i < 6; i++ {
		tw.run("", add("-d", k0, "IMG", k3)...)
	}
	tw.run("", add("-d", k0, "IMG", k3)...)
	tw.run("", append([]string{"luksChangeKey", "-v", "-d", k5, "IMG", k2}, it...)...)
	tw.run("", "luksUUID", "-q", "--uuid", "01234567-89AB-CDEF-0123-456789ABCDEF", "IMG")
	tw.sameSlots()
	w.sameOutput("luksUUID", tw.mine) // luksd reads what it wrote
	if got := w.cs(nil, "luksUUID", tw.mine).ok(t).stdout; got != "01234567-89ab-cdef-0123-456789abcdef\n" {
		t.Fatalf("UUID %q not stored in lower case as cryptsetup does", got)
	}

	for _, key := range []string{k0, k2, k3} {
		if !w.opens(tw.mine, key) {
			t.Fatalf("cryptsetup does not open luksd's volume with %s", key)
		}
	}
	for _, key := range []string{k1, k4, k5} {
		if w.opens(tw.mine, key) {
			t.Fatalf("cryptsetup opens luksd's volume with the removed %s", key)
		}
	}
	w.sameVolumeKey(tw.mine, k2, 512)
	w.sameOutput("luksDump", tw.mine)

	// cryptsetup edits on top of luksd's edits, and luksd reads them.
	w.cs(nil, "luksKillSlot", "-q", tw.mine, "0").ok(t)
	w.cs(nil, append([]string{"luksAddKey", "-d", k2, "-S", "0", tw.mine, k1}, it...)...).ok(t)
	if got := w.luksd(nil, "open", "--test-passphrase", "-v", "-d", k1, tw.mine).ok(t).stdout; !strings.Contains(got, "Key slot 0 unlocked.") {
		t.Fatalf("luksd does not open cryptsetup's new keyslot 0: %q", got)
	}
	w.sameVolumeKey(tw.mine, k1, 512)
}

// TestInteropLUKS1CryptsetupFormatsLuksdEdits: other ciphers and hashes,
// luksd's edits checked by cryptsetup's open and dump.
func TestInteropLUKS1CryptsetupFormatsLuksdEdits(t *testing.T) {
	for _, p := range []struct{ cipher, hash, bits string }{
		{"aes-cbc-essiv:sha256", "sha1", "256"},
		{"aes-xts-plain64", "sha512", "256"},
	} {
		t.Run(strings.ReplaceAll(p.cipher, ":", "_")+"-"+p.hash, func(t *testing.T) {
			w := newWorkspace(t)
			img := w.image("vol.img")
			k0, k1 := w.key("k0", "zero"), w.key("k1", "one")
			w.cs(nil, "luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--cipher", p.cipher,
				"--hash", p.hash, "--key-size", p.bits, img, k0).ok(t)
			vk := w.sameVolumeKey(img, k0, atoiT(t, p.bits))
			// --iter-time calibrates with the header's hash; at least 1000.
			w.luksd(nil, "luksAddKey", "-d", k0, "--iter-time", "1", img, k1).ok(t)
			dump := w.cs(nil, "luksDump", img).ok(t).stdout
			m := regexp.MustCompile(`Key Slot 1: ENABLED\n\tIterations:\s+(\d+)`).FindStringSubmatch(dump)
			if m == nil || atoiT(t, m[1]) < 1000 {
				t.Fatalf("keyslot 1 iterations not calibrated to LUKS1's minimum of 1000 or more:\n%s", dump)
			}
			if !strings.Contains(dump, "Hash spec:     \t"+p.hash) {
				t.Fatalf("hash spec changed:\n%s", dump)
			}
			if got := w.sameVolumeKey(img, k1, atoiT(t, p.bits)); got != vk {
				t.Fatal("the new keyslot holds another volume key")
			}
			w.luksd(nil, "luksKillSlot", "-q", img, "0").ok(t)
			if w.opens(img, k0) || !w.opens(img, k1) {
				t.Fatal("after luksKillSlot 0 only k1 may open")
			}
			w.sameOutput("luksDump", img)
		})
	}
}

// TestInteropAddKeyVolumeKeyFile: luksAddKey --volume-key-file (and its
// old name --master-key-file) on LUKS1 and LUKS2, as cryptsetup answers it.
func TestInteropAddKeyVolumeKeyFile(t *testing.T) {
	for _, typ := range []string{"luks1", "luks2"} {
		t.Run(typ, func(t *testing.T) {
			w := newWorkspace(t)
			k0, k1, k2 := w.key("k0", "zero"), w.key("k1", "one"), w.key("k2", "two")
			pb := cheapPBKDF("pbkdf2")
			tw := newTwin(w, k0, append([]string{"--type", typ}, pb...)...)
			// Both images get the same volume key, so one file serves both.
			vkFile := w.dumpVolumeKey("vk", tw.cs, k0)
			w.cs(nil, append([]string{"luksFormat", "-q", "--type", typ, "--volume-key-file", vkFile, tw.mine, k0}, pb...)...).ok(t)
			long := w.path("long")
			vk, _ := os.ReadFile(vkFile)
			os.WriteFile(long, append(append([]byte(nil), vk...), "trailing bytes"...), 0o600)
			wrong := w.key("wrong", strings.Repeat("x", len(vk)))
			short := w.key("short", "x")
			add := func(extra ...string) []string { return append(append([]string{"luksAddKey", "-v"}, pb...), extra...) }

			tw.run("", add("--volume-key-file", vkFile, "IMG", k1)...)
			tw.run("", add("--master-key-file", long, "-S", "4", "IMG", k2)...)
			tw.run("two\n", add("--volume-key-file", vkFile, "IMG")...)
			tw.run("", add("--volume-key-file", wrong, "IMG", k1)...)
			tw.run("", add("--volume-key-file", short, "IMG", k1)...)
			tw.run("", add("--volume-key-file", w.path("missing"), "IMG", k1)...)
			for _, key := range []string{k1, k2} {
				if !w.opens(tw.mine, key) {
					t.Fatalf("cryptsetup does not open the key added from the volume key file")
				}
			}
			w.sameVolumeKey(tw.mine, k2, len(vk)*8)
			// Without keyslots, LUKS2 needs --key-size to read the file.
			w.cs(nil, "erase", "-q", tw.cs).ok(t)
			w.luksd(nil, "erase", "-q", tw.mine).ok(t)
			tw.run("", add("--volume-key-file", vkFile, "IMG", k1)...)
			if typ == "luks2" {
				tw.run("", add("--volume-key-file", vkFile, "--key-size", "512", "IMG", k1)...)
			}
			if !w.opens(tw.mine, k1) {
				t.Fatal("cryptsetup does not open the key added to an erased volume")
			}
		})
	}
}

// TestInteropUnboundAndPriority: luksAddKey --unbound and config
// --priority on LUKS2, as cryptsetup 2.6.1 does them.
func TestInteropUnboundAndPriority(t *testing.T) {
	w := newWorkspace(t)
	k0, k1, k2 := w.key("k0", "zero"), w.key("k1", "one"), w.key("k2", "two")
	pb := cheapPBKDF("pbkdf2")
	tw := newTwin(w, k0, append([]string{"--type", "luks2"}, pb...)...)
	add := func(extra ...string) []string { return append(append([]string{"luksAddKey", "-v"}, pb...), extra...) }

	// A usage error in cryptsetup: no -v status line (luksd's main prints one).
	tw.run("", append([]string{"luksAddKey", "--unbound"}, append(pb, "IMG", k1)...)...)
	tw.run("", add("--unbound", "-s", "256", "IMG", k1)...)
	tw.run("two\n", add("--unbound", "--key-size", "128", "-S", "7", "IMG")...)
	tw.run("", add("-d", k0, "IMG", k2)...)
	// --unbound with --volume-key-file stores the file's key.
	ukey := w.key("ukey", "0123456789abcdef0123456789abcdef")
	tw.run("", add("--unbound", "-s", "256", "--volume-key-file", ukey, "-S", "9", "IMG", k1)...)
	dump := w.cs(nil, "luksDump", "--unbound", "-S", "9", "-d", k1, tw.mine).ok(t).stdout
	if !strings.Contains(dump, "30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66") {
		t.Fatalf("the unbound key is not the file's:\n%s", dump)
	}
	tw.run("", "luksKillSlot", "-q", "IMG", "9")
	// Neither opens the volume with the unbound passphrase.
	for _, img := range []string{tw.cs, tw.mine} {
		if w.opens(img, k1) {
			t.Fatal("the unbound passphrase opens the volume")
		}
	}
	w.cs(nil, "open", "--test-passphrase", "--unbound", "-S", "1", "-d", k1, tw.mine).ok(t)
	w.cs(nil, "open", "--test-passphrase", "--unbound", "-S", "7", "-d", k2, tw.mine).ok(t)

	// Priorities: k0 (slot 0) and k2 (slot 2).
	tw.run("", "config", "--priority", "prefer", "-S", "2", "IMG")
	tw.run("", "open", "--test-passphrase", "-v", "-d", k2, "IMG")
	tw.run("", "config", "--priority", "ignore", "-S", "0", "IMG")
	tw.run("", "open", "--test-passphrase", "-v", "-d", k0, "IMG")
	tw.run("", "open", "--test-passphrase", "-v", "-S", "0", "-d", k0, "IMG")
	tw.run("", "config", "--priority", "normal", "-S", "0", "IMG")
	tw.run("", "open", "--test-passphrase", "-v", "-d", k0, "IMG")
	tw.run("", "config", "--priority", "sometimes", "-S", "0", "IMG")
	tw.run("", "config", "--priority", "prefer", "IMG")
	tw.run("", "config", "IMG")
	tw.run("", "luksKillSlot", "-q", "IMG", "1")
	w.sameOutput("luksDump", tw.mine)
	w.sameOutput("luksDump", "--dump-json-metadata", tw.mine)
	// erase leaves the unbound keyslot 7 and its key.
	tw.run("", "erase", "-q", "IMG")
	w.cs(nil, "open", "--test-passphrase", "--unbound", "-S", "7", "-d", k2, tw.mine).ok(t)
	w.cs(nil, "open", "--test-passphrase", "-d", k0, tw.mine).expect(t, 1, "No usable keyslot is available.")
}

// TestInteropLUKS1DetachedHeader: keys of a LUKS1 volume whose header
// lives in its own file (payload offset 0) are edited through --header.
func TestInteropLUKS1DetachedHeader(t *testing.T) {
	w := newWorkspace(t)
	data, hdr := w.image("data.img"), testtool.ImageAt(t, w.dir, "hdr.img", 4<<20)
	k0, k1 := w.key("k0", "zero"), w.key("k1", "one")
	w.cs(nil, "luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--header", hdr, data, k0).ok(t)
	w.luksd(nil, "luksAddKey", "--header", hdr, "-d", k0, "--pbkdf-force-iterations", "1000", data, k1).ok(t)
	w.luksd(nil, "luksKillSlot", "-q", "--header", hdr, data, "0").ok(t)
	w.cs(nil, "open", "--test-passphrase", "--header", hdr, "-d", k1, data).ok(t)
	w.cs(nil, "open", "--test-passphrase", "--header", hdr, "-d", k0, data).expect(t, 2, "No key available with this passphrase.")
	if !strings.Contains(w.cs(nil, "luksDump", hdr).ok(t).stdout, "Payload offset:\t0\n") {
		t.Fatal("the detached header's payload offset changed")
	}
}

// TestInteropChangeKeyAllSlotsFull: with every LUKS2 keyslot taken,
// luksChangeKey rewrites the passphrase's own keyslot, as cryptsetup does.
func TestInteropChangeKeyAllSlotsFull(t *testing.T) {
	w := newWorkspace(t)
	k0, k1, k2 := w.key("k0", "zero"), w.key("k1", "one"), w.key("k2", "two")
	pb := cheapPBKDF("pbkdf2")
	tw := newTwin(w, k0, append([]string{"--type", "luks2"}, pb...)...)
	for _, img := range []string{tw.cs, tw.mine} {
		for i := 1; i < 32; i++ {
			key := k0
			if i == 17 {
				key = k1
			}
			w.cs(nil, append([]string{"luksAddKey", "-q", "-d", k0, img, key}, pb...)...).ok(t)
		}
	}
	tw.run("", append([]string{"luksAddKey", "-v", "-d", k0, "IMG", k2}, pb...)...)
	tw.run("", append([]string{"luksChangeKey", "-v", "-d", k1, "IMG", k2}, pb...)...)
	if !w.opens(tw.mine, k2) || w.opens(tw.mine, k1) {
		t.Fatal("the changed passphrase does not replace the old one")
	}
}

// TestInteropUnboundKeyslotsDoNotCount: for "the last keyslot" and "any
// remaining passphrase", cryptsetup counts only keyslots bound to the
// volume; so does luksd.
func TestInteropUnboundKeyslotsDoNotCount(t *testing.T) {
	w := newWorkspace(t)
	k0, k1, k2 := w.key("k0", "zero"), w.key("k1", "one"), w.key("k2", "two")
	pb := cheapPBKDF("pbkdf2")
	fresh := func() *twin {
		tw := newTwin(w, k0, append([]string{"--type", "luks2"}, pb...)...)
		for _, img := range []string{tw.cs, tw.mine} {
			w.cs(nil, append([]string{"luksAddKey", "-q", "--unbound", "-s", "256", img, k1}, pb...)...).ok(t)
		}
		return tw
	}
	// Slot 0 is the last bound keyslot: only its own passphrase kills it.
	tw := fresh()
	tw.run("", "luksKillSlot", "-v", "-d", k1, "IMG", "0")
	tw.run("", "luksKillSlot", "-v", "-d", k0, "IMG", "0")
	// Only the unbound keyslot is left: nothing to add from, nothing to
	// remove by passphrase, and killing it asks nothing of the passphrase.
	tw.run("", append([]string{"luksAddKey", "-v", "-d", k1, "IMG", k2}, pb...)...)
	tw.run("", "luksRemoveKey", "-v", "-d", k1, "IMG")
	tw.run("", "luksKillSlot", "-v", "-d", k2, "IMG", "1")
	// With a second bound keyslot, the unbound passphrase is no remaining one.
	tw = fresh()
	for _, img := range []string{tw.cs, tw.mine} {
		w.cs(nil, append([]string{"luksAddKey", "-q", "-d", k0, img, k2}, pb...)...).ok(t)
	}
	tw.run("", "luksKillSlot", "-v", "-d", k1, "IMG", "2")
	tw.run("", "luksKillSlot", "-v", "-d", k1, "IMG", "1")
	tw.run("", "luksKillSlot", "-v", "-d", k0, "IMG", "1")
	tw.run("", "luksKillSlot", "-v", "-d", k0, "IMG", "2")

	// luksChangeKey -S of an unbound keyslot keeps it unbound, with its
	// key and digest; luksAddKey cannot add from an unbound key.
	tw = fresh()
	unboundKey := func(key string) string {
		out := w.cs(nil, "luksDump", "--unbound", "-S", "1", "-d", key, tw.mine).ok(t).stdout
		return out[strings.Index(out, "Unbound Key:"):]
	}
	before := unboundKey(k1)
	tw.run("", append([]string{"luksAddKey", "-v", "-S", "1", "--new-key-slot", "5", "-d", k1, "IMG", k2}, pb...)...)
	tw.run("", append([]string{"luksChangeKey", "-v", "-S", "1", "-d", k1, "IMG", k2}, pb...)...)
	if after := unboundKey(k2); after != before {
		t.Fatalf("the unbound key changed:\n%s\n%s", before, after)
	}
	w.sameOutput("luksDump", "--dump-json-metadata", tw.mine)
	if a, b := w.cs(nil, "luksDump", tw.mine).ok(t).stdout, w.cs(nil, "luksDump", tw.cs).ok(t).stdout; normalizeSalts(a) != normalizeSalts(b) {
		t.Fatalf("luksDump after changing the unbound passphrase:\n--- cryptsetup\n%s--- luksd\n%s", b, a)
	}
}

// normalizeSalts drops the hex lines (salts, digests), the UUID and the
// epoch of a LUKS2 luksDump (luksd's crash-safe luksChangeKey writes the
// metadata more often than cryptsetup's).
func normalizeSalts(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "UUID:" || f[0] == "Epoch:" || f[0] == "Salt:" || f[0] == "Digest:" || len(f[0]) == 2 && strings.Trim(f[0], "0123456789abcdef") == "") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
