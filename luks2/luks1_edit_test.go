package luks2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// csFormatLUKS1 has cryptsetup format a LUKS1 image with pass in keyslot 0.
func csFormatLUKS1(t *testing.T, pass []byte, extra ...string) string {
	t.Helper()
	img := testtool.Image(t, 8<<20)
	args := append([]string{"luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--key-file", testtool.KeyFile(t, pass)}, extra...)
	cryptsetup(t, append(args, img)...)
	return img
}

// opensSlot reports which keyslot cryptsetup opens with pass (-1: none).
func opensSlot(t *testing.T, img string, pass []byte) int {
	t.Helper()
	out, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "-v", "--key-file", testtool.KeyFile(t, pass), img)
	if err != nil {
		if !strings.Contains(out, "No key available with this passphrase.") && !strings.Contains(out, "No usable keyslot is available.") {
			t.Fatalf("cryptsetup open --test-passphrase: %v\n%s", err, out)
		}
		return -1
	}
	var slot int
	if _, err := fmt.Sscanf(out[strings.Index(out, "Key slot "):], "Key slot %d unlocked.", &slot); err != nil {
		t.Fatalf("no unlocked slot in %q", out)
	}
	return slot
}

// luks1Slot decodes keyslot i of the raw header in img.
func luks1Slot(t *testing.T, img string, i int) (active, iterations uint32, salt []byte) {
	t.Helper()
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	b := raw[luks1KeyblockBase+i*luks1KeyblockSize:]
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), b[8:40]
}

// TestLUKS1EditsCryptsetupAccepts: on LUKS1 volumes cryptsetup formats,
// luksd's AddKey, KillSlot and SetUUID give headers cryptsetup opens with
// the same volume key, dumps as luksd does, and edits further.
func TestLUKS1EditsCryptsetupAccepts(t *testing.T) {
	cases := []struct{ name, cipher, hash, bits string }{
		{"xts-sha256", "aes-xts-plain64", "sha256", "512"},
		{"xts-sha512-256", "aes-xts-plain64", "sha512", "256"},
		{"essiv-sha1", "aes-cbc-essiv:sha256", "sha1", "256"},
		{"plain64-ripemd160", "aes-cbc-plain64", "ripemd160", "128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p0, p1, p2 := []byte("first"), []byte("second"), []byte("third")
			img := csFormatLUKS1(t, p0, "--cipher", tc.cipher, "--hash", tc.hash, "--key-size", tc.bits)
			want := cryptsetupVolumeKey(t, img, testtool.KeyFile(t, p0))
			h, f := readHdr(t, img)
			vk, _, err := h.Unlock(f, p0, -1)
			if err != nil || !bytes.Equal(vk, want) {
				t.Fatalf("Unlock: %v", err)
			}

			slot, err := h.AddKey(f, vk, p1, -1, PBKDF{Type: "pbkdf2", Iterations: 1000})
			if err != nil || slot != 1 {
				t.Fatalf("AddKey: slot %d, %v", slot, err)
			}
			if s := opensSlot(t, img, p1); s != 1 {
				t.Fatalf("cryptsetup opens the new passphrase in slot %d, want 1", s)
			}
			if got := cryptsetupVolumeKey(t, img, testtool.KeyFile(t, p1)); !bytes.Equal(got, want) {
				t.Fatal("the new keyslot holds another volume key")
			}
			sameLines(t, "luksDump after AddKey", dumpText(t, h, DumpOptions{Device: img}), cryptsetup(t, "luksDump", img))
			if _, it, _ := luks1Slot(t, img, 1); it != 1000 {
				t.Fatalf("keyslot 1 has %d iterations, want the forced 1000", it)
			}

			// A named slot, with calibrated iterations (at least 1000).
			if slot, err := h.AddKey(f, vk, p2, 5, PBKDF{IterTime: time.Millisecond}); err != nil || slot != 5 {
				t.Fatalf("AddKey slot 5: %d, %v", slot, err)
			}
			if _, it, _ := luks1Slot(t, img, 5); it < minPBKDF2Iterations {
				t.Fatalf("calibrated keyslot has %d iterations, below LUKS1's minimum", it)
			}
			if s := opensSlot(t, img, p2); s != 5 {
				t.Fatalf("cryptsetup opens slot %d, want 5", s)
			}

			// KillSlot 0: cryptsetup no longer opens p0; the header slot is
			// disabled with zero salt and iterations, as cryptsetup leaves it.
			areaOff := int64(h.impl.(*luks1Header).slots[0].offset) * 512
			before := readAt(t, img, areaOff, 512)
			if err := h.KillSlot(f, 0); err != nil {
				t.Fatal(err)
			}
			if opensSlot(t, img, p0) != -1 || opensSlot(t, img, p1) != 1 {
				t.Fatal("after KillSlot 0 only the other passphrases may open")
			}
			active, it, salt := luks1Slot(t, img, 0)
			if active != luks1KeyDisabled || it != 0 || !bytes.Equal(salt, make([]byte, 32)) {
				t.Fatalf("killed slot: active %#x iterations %d salt %x", active, it, salt)
			}
			if bytes.Equal(readAt(t, img, areaOff, 512), before) {
				t.Fatal("the killed keyslot's key material was not wiped")
			}
			sameLines(t, "luksDump after KillSlot", dumpText(t, h, DumpOptions{Device: img}), cryptsetup(t, "luksDump", img))

			const uuid = "0badcafe-1234-4321-8765-0123456789ab"
			if err := h.SetUUID(f, uuid); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(cryptsetup(t, "luksUUID", img)); got != uuid {
				t.Fatalf("cryptsetup sees UUID %q", got)
			}

			// cryptsetup edits on top, luksd reads its work.
			p3 := []byte("fourth")
			cryptsetup(t, "luksAddKey", "-q", "--pbkdf-force-iterations", "1000", "--key-file", testtool.KeyFile(t, p2), img, testtool.KeyFile(t, p3))
			cryptsetup(t, "luksKillSlot", "-q", "--key-file", testtool.KeyFile(t, p3), img, "1")
			h2, f2 := readHdr(t, img)
			if got, s, err := h2.Unlock(f2, p3, -1); err != nil || s != 0 || !bytes.Equal(got, want) {
				t.Fatalf("cryptsetup's new keyslot: slot %d, %v", s, err)
			}
			if _, _, err := h2.Unlock(f2, p1, -1); !errors.Is(err, ErrWrongPassphrase) {
				t.Fatalf("keyslot 1 killed by cryptsetup still opens: %v", err)
			}
		})
	}
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLUKS1EditRefusals: what cryptsetup refuses on LUKS1 leaves the image
// byte for byte as it was.
func TestLUKS1EditRefusals(t *testing.T) {
	pass := []byte("pw")
	img := csFormatLUKS1(t, pass)
	h, f := readHdr(t, img)
	vk, _, err := h.Unlock(f, pass, -1)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(img)
	wrongVK := bytes.Clone(vk)
	wrongVK[0] ^= 1
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"argon2id", func() error { _, err := h.AddKey(f, vk, pass, -1, cheapArgon2id); return err }, ErrLUKS1PBKDF},
		{"argon2i", func() error { _, err := h.AddKey(f, vk, pass, -1, cheapArgon2i); return err }, ErrLUKS1PBKDF},
		{"wrong volume key", func() error { _, err := h.AddKey(f, wrongVK, pass, -1, cheapPBKDF2); return err }, ErrVolumeKeyMismatch},
		{"short volume key", func() error { _, err := h.AddKey(f, vk[:32], pass, -1, cheapPBKDF2); return err }, ErrVolumeKeyMismatch},
		{"too few iterations", func() error {
			_, err := h.AddKey(f, vk, pass, -1, PBKDF{Type: "pbkdf2", Iterations: 999})
			return err
		}, nil},
		{"slot taken", func() error { _, err := h.AddKey(f, vk, pass, 0, cheapPBKDF2); return err }, nil},
		{"slot out of range", func() error { _, err := h.AddKey(f, vk, pass, 8, cheapPBKDF2); return err }, nil},
		{"kill inactive", func() error { return h.KillSlot(f, 3) }, nil},
		{"kill out of range", func() error { return h.KillSlot(f, 8) }, nil},
		{"bad uuid", func() error { return h.SetUUID(f, "not-a-uuid") }, nil},
		{"label", func() error { l := "x"; return h.SetLabel(f, &l, nil) }, ErrUnsupported},
		{"priority", func() error { return h.SetPriority(f, 0, PriorityPrefer) }, ErrUnsupported},
		{"unbound", func() error { _, err := h.AddUnboundKey(f, vk, pass, -1, cheapPBKDF2); return err }, ErrUnsupported},
	} {
		err := tc.do()
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want an error (%v)", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tc.name, err)
		}
		if now, _ := os.ReadFile(img); !bytes.Equal(now, orig) {
			t.Fatalf("%s: a refused edit changed the image", tc.name)
		}
	}
	// All eight slots full: ErrNoFreeSlot.
	for i := 1; i < 8; i++ {
		if _, err := h.AddKey(f, vk, []byte("k"+strconv.Itoa(i)), -1, cheapPBKDF2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.AddKey(f, vk, pass, -1, cheapPBKDF2); !errors.Is(err, ErrNoFreeSlot) {
		t.Fatalf("ninth key: %v, want ErrNoFreeSlot", err)
	}
	if s := opensSlot(t, img, []byte("k7")); s != 7 {
		t.Fatalf("cryptsetup opens k7 in slot %d", s)
	}
}

// TestLUKS1CalibratedIterations: with the PBKDF2 model of 1 µs per
// iteration, --iter-time gives iterations in proportion, never below 1000.
func TestLUKS1CalibratedIterations(t *testing.T) {
	withModel(t, func(p kdfParams) time.Duration { return time.Duration(p.iterations) * time.Microsecond })
	h := &luks1Header{hashSpec: "sha256", keyBytes: 64}
	for _, tc := range []struct {
		p    PBKDF
		want int
	}{
		{PBKDF{IterTime: 50 * time.Millisecond}, 50000},
		{PBKDF{Type: "pbkdf2", IterTime: 100 * time.Microsecond}, 1000},
		{PBKDF{}, 2000000}, // cryptsetup's default 2 s
		{PBKDF{Iterations: 1234}, 1234},
	} {
		got, err := h.slotIterations(tc.p)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %d iterations (%v), want %d", tc.p, got, err, tc.want)
		}
	}
}

// writeLog renders recorded writes and flushes as "write OFF" and "sync",
// a run of writes past the header as one, by its first offset.
func writeLog(ops []devtest.Op) []string {
	var log []string
	for _, op := range ops {
		if op.Flush {
			log = append(log, "sync")
			continue
		}
		if op.Off > 0 && len(log) > 0 && strings.HasPrefix(log[len(log)-1], "write ") && log[len(log)-1] != "write 0" {
			continue // a write continuing the last one's range
		}
		log = append(log, fmt.Sprintf("write %d", op.Off))
	}
	return log
}

// TestLUKS1EditOrder: AddKey makes the key material durable before the
// header enables it; KillSlot disables the keyslot in the header before
// it wipes the material. A crash at any write leaves a header cryptsetup
// reads, where every old passphrase still opens.
func TestLUKS1EditOrder(t *testing.T) {
	pass := []byte("old")
	img := csFormatLUKS1(t, pass)
	f, size := openRW(t, img)
	dev := devtest.NewRecorder(f)
	h, err := Read(dev, size)
	if err != nil {
		t.Fatal(err)
	}
	vk, _, err := h.Unlock(dev, pass, -1)
	if err != nil {
		t.Fatal(err)
	}
	area := int64(h.impl.(*luks1Header).slots[1].offset) * 512
	if _, err := h.AddKey(dev, vk, []byte("new"), -1, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("write %d", area), "sync", "write 0", "sync"}
	added := len(dev.Ops())
	if got := writeLog(dev.Ops()); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("AddKey wrote %v, want %v", got, want)
	}
	if err := h.KillSlot(dev, 1); err != nil {
		t.Fatal(err)
	}
	want = []string{"sync", "write 0", "sync", fmt.Sprintf("write %d", area), "sync"}
	if got := writeLog(dev.Ops()[added:]); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("KillSlot wrote %v, want %v", got, want)
	}

	// Crash at each write of AddKey, then of KillSlot.
	for failAt := 1; failAt <= 2; failAt++ {
		img := csFormatLUKS1(t, pass)
		f, size := openRW(t, img)
		h, _ := Read(f, size)
		vk, _, err := h.Unlock(f, pass, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.AddKey(f, vk, []byte("kept"), 1, cheapPBKDF2); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"add", "kill"} {
			dev := devtest.NewFailAfter(f) // a crash at write failAt
			dev.Writes(failAt-1, errors.New("simulated crash"))
			h, err := Read(dev, size)
			if err != nil {
				t.Fatal(err)
			}
			if op == "add" {
				_, err = h.AddKey(dev, vk, []byte("crash"), 2, cheapPBKDF2)
			} else {
				err = h.KillSlot(dev, 1)
			}
			if err == nil {
				t.Fatalf("%s with a crash at write %d succeeded", op, failAt)
			}
			if s := opensSlot(t, img, pass); s != 0 {
				t.Fatalf("after a crash in %s at write %d cryptsetup opens the old passphrase in slot %d", op, failAt, s)
			}
			cryptsetup(t, "luksDump", img)
		}
		// The crashed AddKey never enabled slot 2.
		if active, _, _ := luks1Slot(t, img, 2); active != luks1KeyDisabled {
			t.Fatalf("crash at write %d: slot 2 is enabled", failAt)
		}
	}
}

// addKeyPeerOpens adds the passphrase added to img's header h with luksd
// and checks that cryptsetup opens it in the keyslot AddKey chose.
func addKeyPeerOpens(t *testing.T, h *Header, f fileDev, img string, vk, added []byte) {
	t.Helper()
	n, err := h.AddKey(f, vk, added, -1, cheapPBKDF2)
	if err != nil {
		t.Fatal(err)
	}
	if s := opensSlot(t, img, added); s != n {
		t.Fatalf("cryptsetup opens the added key in slot %d, want %d", s, n)
	}
}

// TestPeerLUKS1ImagesEdited: cryptsetup's own LUKS1 test images, copied,
// take a new key and lose their old one under luksd, and cryptsetup
// agrees; images whose cipher luksd cannot run are refused unchanged.
func TestPeerLUKS1ImagesEdited(t *testing.T) {
	imgs, _, key := peerLUKS1Images(t)
	edited := 0
	for _, img := range imgs {
		t.Run(filepath.Base(img), func(t *testing.T) {
			h, f := readHdr(t, img)
			vk, slot, err := h.Unlock(f, key, -1)
			if errors.Is(err, ErrUnsupported) {
				orig, _ := os.ReadFile(img)
				if _, err := h.AddKey(f, make([]byte, h.impl.(*luks1Header).keyBytes), []byte("x"), -1, cheapPBKDF2); err == nil {
					t.Fatal("AddKey on a cipher luksd cannot run succeeded")
				}
				if now, _ := os.ReadFile(img); !bytes.Equal(now, orig) {
					t.Fatal("a refused AddKey changed the image")
				}
				t.Skipf("SKIP (not supported by luksd, refused unchanged: %v)", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			added := []byte("added to a peer image")
			n, err := h.AddKey(f, vk, added, -1, cheapPBKDF2)
			if err != nil {
				t.Fatal(err)
			}
			if seg, _ := h.Segment(); !cryptsetupUnlocksHere(seg.Cipher) {
				checkEditedByLuksd(t, h, f, img, vk, key, added, slot, n)
				edited++
				return
			}
			if s := opensSlot(t, img, added); s != n {
				t.Fatalf("cryptsetup opens the added key in slot %d, want %d", s, n)
			}
			if err := h.KillSlot(f, slot); err != nil {
				t.Fatal(err)
			}
			if opensSlot(t, img, key) != -1 {
				t.Fatal("the killed keyslot still opens in cryptsetup")
			}
			if got := cryptsetupVolumeKey(t, img, testtool.KeyFile(t, added)); !bytes.Equal(got, vk) {
				t.Fatal("volume key changed")
			}
			sameLines(t, "luksDump", dumpText(t, h, DumpOptions{Device: img}), cryptsetup(t, "luksDump", img))
			edited++
		})
	}
	if edited < 10 {
		t.Fatalf("only %d peer LUKS1 images edited; the aes-xts, aes-cbc-essiv, serpent-xts and twofish-xts ones must be", edited)
	}
}

// checkEditedByLuksd is TestPeerLUKS1ImagesEdited's check for a cipher this
// host's cryptsetup cannot unlock (cryptsetupUnlocksHere): luksd reads the
// image again from disk and finds the added key in slot n and the old one
// in slot old until it is killed, and cryptsetup's dump agrees.
func checkEditedByLuksd(t *testing.T, h *Header, f Device, img string, vk, key, added []byte, old, n int) {
	t.Helper()
	reread := func(pass []byte) (int, error) {
		h2, f2 := readHdr(t, img)
		got, s, err := h2.Unlock(f2, pass, -1)
		if err == nil && !bytes.Equal(got, vk) {
			t.Fatalf("slot %d gives another volume key", s)
		}
		return s, err
	}
	if s, err := reread(added); err != nil || s != n {
		t.Fatalf("added key: slot %d, %v; want slot %d", s, err, n)
	}
	if err := h.KillSlot(f, old); err != nil {
		t.Fatal(err)
	}
	if s, err := reread(key); err == nil {
		t.Fatalf("the killed key still opens slot %d", s)
	}
	sameLines(t, "luksDump", dumpText(t, h, DumpOptions{Device: img}), cryptsetup(t, "luksDump", img))
}

// TestPeerCompatImagesEdited: the LUKS1 compat images (the 1.0 layout
// too) take a key from luksd that cryptsetup opens.
func TestPeerCompatImagesEdited(t *testing.T) {
	for _, name := range []string{"compatimage.img.xz", "compatv10image.img.xz"} {
		t.Run(name, func(t *testing.T) {
			img := peerFile(t, t.TempDir(), name)
			h, f := readHdr(t, img)
			vk, _, err := h.Unlock(f, []byte("compatkey"), -1)
			if err != nil {
				t.Fatal(err)
			}
			added := []byte("luksd compat")
			addKeyPeerOpens(t, h, f, img, vk, added)
			sameLines(t, "luksDump", dumpText(t, h, DumpOptions{Device: img}), cryptsetup(t, "luksDump", img))
		})
	}
}

// TestLUKS1KillWipesLikeCryptsetup: KillSlot overwrites what cryptsetup's
// luksKillSlot overwrites: the key material, not the padding after it.
func TestLUKS1KillWipesLikeCryptsetup(t *testing.T) {
	for _, bits := range []string{"512", "256"} {
		t.Run(bits, func(t *testing.T) {
			pass := []byte("wipe")
			kf := testtool.KeyFile(t, pass)
			mine, theirs := csFormatLUKS1(t, pass, "--key-size", bits), csFormatLUKS1(t, pass, "--key-size", bits)
			for _, img := range []string{mine, theirs} {
				cryptsetup(t, "luksAddKey", "-q", "--pbkdf-force-iterations", "1000", "--key-file", kf, img, testtool.KeyFile(t, []byte("one")))
			}
			h, f := readHdr(t, mine)
			v1 := h.impl.(*luks1Header)
			from := int64(v1.slots[1].offset) * 512
			to := from + int64(afSize(int(v1.keyBytes), luks1Stripes))
			changed := func(img string, kill func()) (last int64) {
				before, _ := os.ReadFile(img)
				kill()
				after, _ := os.ReadFile(img)
				for i := from; i < int64(len(after)); i += 512 {
					if !bytes.Equal(before[i:i+512], after[i:i+512]) {
						last = i
					}
				}
				if !bytes.Equal(before[:from][luks1HeaderSize:], after[:from][luks1HeaderSize:]) {
					t.Fatal("bytes before the keyslot area changed")
				}
				return last
			}
			csLast := changed(theirs, func() { cryptsetup(t, "luksKillSlot", "-q", theirs, "1") })
			myLast := changed(mine, func() {
				if err := h.KillSlot(f, 1); err != nil {
					t.Fatal(err)
				}
			})
			if csLast != myLast || myLast != to-512 {
				t.Fatalf("last sector wiped: luksd %d, cryptsetup %d, the area ends at %d", myLast, csLast, to)
			}
		})
	}
}
