package luks2

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

type interopCase struct {
	name    string
	cipher  string
	keySize int // bytes
	sector  int
	pbkdf   PBKDF
}

var interopCases = []interopCase{
	{"xts512-512-argon2id", "aes-xts-plain64", 64, 512, cheapArgon2id},
	{"xts256-4096-argon2i", "aes-xts-plain64", 32, 4096, cheapArgon2i},
	{"xts512-4096-pbkdf2", "aes-xts-plain64", 64, 4096, cheapPBKDF2},
	{"essiv-512-pbkdf2-sha512", "aes-cbc-essiv:sha256", 32, 512, PBKDF{Type: "pbkdf2", Hash: "sha512", Iterations: 1000}},
	{"essiv-4096-argon2id", "aes-cbc-essiv:sha256", 32, 4096, cheapArgon2id},
}

// cryptsetupPBKDFArgs are the cryptsetup flags for the same forced PBKDF.
func cryptsetupPBKDFArgs(p PBKDF) []string {
	args := []string{"--pbkdf", p.Type, "--pbkdf-force-iterations", fmt.Sprint(p.Iterations)}
	if p.Type == "pbkdf2" {
		return append(args, "--hash", p.Hash)
	}
	return append(args, "--pbkdf-memory", fmt.Sprint(p.MemoryKiB), "--pbkdf-parallel", fmt.Sprint(p.Parallel))
}

// TestLuksdFormatCryptsetupOpens: cryptsetup validates luksd's headers,
// opens its keyslot and finds the same volume key; luksd's luksDump text is
// cryptsetup's, line by line.
func TestLuksdFormatCryptsetupOpens(t *testing.T) {
	for _, tc := range interopCases {
		t.Run(tc.name, func(t *testing.T) {
			img := testtool.Image(t, 20<<20)
			f, size := openRW(t, img)
			pass := []byte("luksd pass " + tc.name)
			h, vk, err := Format(f, size, FormatOptions{Cipher: tc.cipher, KeySize: tc.keySize, SectorSize: tc.sector, PBKDF: tc.pbkdf, Label: "lbl", Subsystem: "sub"}, pass)
			if err != nil {
				t.Fatal(err)
			}
			if len(vk) != tc.keySize {
				t.Fatalf("volume key has %d bytes, want %d", len(vk), tc.keySize)
			}
			kf := testtool.KeyFile(t, pass)
			cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img)
			if got := cryptsetupVolumeKey(t, img, kf); !bytes.Equal(got, vk) {
				t.Fatalf("cryptsetup's volume key %x, luksd's %x", got, vk)
			}
			if _, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", testtool.KeyFile(t, []byte("wrong")), img); err == nil {
				t.Fatal("cryptsetup accepted a wrong passphrase")
			}
			sameLines(t, "luksDump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
			vkOut := cryptsetup(t, "luksDump", "-q", "--dump-volume-key", "--key-file", kf, img)
			sameLines(t, "luksDump --dump-volume-key", dumpText(t, h, DumpOptions{VolumeKey: vk, Device: img}), vkOut)
			json := cryptsetup(t, "luksDump", "--dump-json-metadata", img)
			if string(h.JSON()) != json {
				t.Fatalf("JSON() differs from --dump-json-metadata:\n%s\n---\n%s", h.JSON(), json)
			}
			seg, err := h.Segment()
			if err != nil {
				t.Fatal(err)
			}
			want := Segment{Offset: 16 << 20, Cipher: tc.cipher, SectorSize: tc.sector, KeySize: tc.keySize}
			if seg != want {
				t.Fatalf("Segment() = %+v, want %+v", seg, want)
			}
		})
	}
}

// TestCryptsetupFormatLuksdUnlocks: luksd opens cryptsetup's keyslots and
// gets the volume key cryptsetup was given.
func TestCryptsetupFormatLuksdUnlocks(t *testing.T) {
	for _, tc := range interopCases {
		t.Run(tc.name, func(t *testing.T) {
			img := testtool.Image(t, 20<<20)
			pass := []byte("cs pass " + tc.name)
			vk := make([]byte, tc.keySize)
			rand.Read(vk)
			args := []string{"luksFormat", "-q", "--type", "luks2", "--cipher", tc.cipher, "--key-size", fmt.Sprint(tc.keySize * 8),
				"--sector-size", fmt.Sprint(tc.sector), "--volume-key-file", testtool.KeyFile(t, vk), "--key-file", testtool.KeyFile(t, pass)}
			cryptsetup(t, append(append(args, cryptsetupPBKDFArgs(tc.pbkdf)...), img)...)
			h, f := readHdr(t, img)
			got, slot, err := h.Unlock(f, pass, -1)
			if err != nil {
				t.Fatal(err)
			}
			if slot != 0 || !bytes.Equal(got, vk) {
				t.Fatalf("Unlock = slot %d key %x, want slot 0 key %x", slot, got, vk)
			}
			if _, _, err := h.Unlock(f, []byte("wrong"), -1); err != ErrWrongPassphrase {
				t.Fatalf("wrong passphrase: %v, want ErrWrongPassphrase", err)
			}
			sameLines(t, "luksDump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
			seg, err := h.Segment()
			if err != nil || seg.Cipher != tc.cipher || seg.SectorSize != tc.sector || seg.KeySize != tc.keySize {
				t.Fatalf("Segment() = %+v, %v", seg, err)
			}
		})
	}
}

// TestLuksdEditsCryptsetupHeader: add, kill, label and UUID changes made by
// luksd on a cryptsetup header are accepted by cryptsetup, and the other way.
func TestLuksdEditsCryptsetupHeader(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	pass0, pass1 := []byte("zero"), []byte("one")
	kf0, kf1 := testtool.KeyFile(t, pass0), testtool.KeyFile(t, pass1)
	cryptsetup(t, append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", kf0}, append(cryptsetupPBKDFArgs(cheapPBKDF2), img)...)...)

	h, f := readHdr(t, img)
	vk, _, err := h.Unlock(f, pass0, -1)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := h.AddKey(f, vk, pass1, -1, cheapArgon2id)
	if err != nil || slot != 1 {
		t.Fatalf("AddKey = %d, %v", slot, err)
	}
	cryptsetup(t, "open", "--test-passphrase", "--key-file", kf1, img)
	out := cryptsetup(t, "open", "-v", "--test-passphrase", "--key-file", kf1, img)
	if !strings.Contains(out, "Key slot 1 unlocked") {
		t.Fatalf("cryptsetup did not open keyslot 1:\n%s", out)
	}
	sameLines(t, "after AddKey", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
	if _, err := h.AddKey(f, bytes.Repeat([]byte{1}, len(vk)), pass1, -1, cheapPBKDF2); err == nil {
		t.Fatal("AddKey accepted a key that is not the volume key")
	}

	if err := h.KillSlot(f, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", kf0, img); err == nil {
		t.Fatal("cryptsetup still opens the killed keyslot")
	}
	cryptsetup(t, "open", "--test-passphrase", "--key-file", kf1, img)

	label, sub := "new label", "new sub"
	if err := h.SetLabel(f, &label, &sub); err != nil {
		t.Fatal(err)
	}
	dump := cryptsetup(t, "luksDump", img)
	if !strings.Contains(dump, "Label:         \tnew label\n") || !strings.Contains(dump, "Subsystem:     \tnew sub\n") {
		t.Fatalf("label not in cryptsetup's dump:\n%s", dump)
	}
	uuid := "12345678-1234-4234-8234-123456789abc"
	if err := h.SetUUID(f, uuid); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(cryptsetup(t, "luksUUID", img)); got != uuid {
		t.Fatalf("cryptsetup luksUUID = %q, want %q", got, uuid)
	}
	sameLines(t, "after edits", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))

	// cryptsetup edits after luksd; luksd reads the result.
	kf2 := testtool.KeyFile(t, []byte("two"))
	cryptsetup(t, append([]string{"luksAddKey", "-q", "--key-file", kf1}, append(cryptsetupPBKDFArgs(cheapArgon2i), img, kf2)...)...)
	h2, f2 := readHdr(t, img)
	if got := h2.ActiveKeyslots(); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("ActiveKeyslots = %v, want [0 1]", got)
	}
	vk2, slot, err := h2.Unlock(f2, []byte("two"), -1)
	if err != nil || slot != 0 || !bytes.Equal(vk2, vk) {
		t.Fatalf("Unlock after cryptsetup's luksAddKey: slot %d, %v", slot, err)
	}
	if h2.Label() != label || h2.Subsystem() != sub || h2.UUID() != uuid {
		t.Fatalf("label/subsystem/uuid = %q %q %q", h2.Label(), h2.Subsystem(), h2.UUID())
	}
}

// TestKeyslotPriority: preferred keyslots are tried first, ignored ones
// only when named.
func TestKeyslotPriority(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	pass := []byte("same")
	kf := testtool.KeyFile(t, pass)
	cryptsetup(t, append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", kf}, append(cryptsetupPBKDFArgs(cheapPBKDF2), img)...)...)
	cryptsetup(t, append([]string{"luksAddKey", "-q", "--key-file", kf}, append(cryptsetupPBKDFArgs(cheapPBKDF2), img, kf)...)...)
	h, f := readHdr(t, img)
	if _, slot, err := h.Unlock(f, pass, -1); err != nil || slot != 0 {
		t.Fatalf("normal priorities: slot %d, %v; want 0", slot, err)
	}
	cryptsetup(t, "config", "--priority", "prefer", "--key-slot", "1", img)
	h, f = readHdr(t, img)
	if _, slot, err := h.Unlock(f, pass, -1); err != nil || slot != 1 {
		t.Fatalf("slot 1 preferred: slot %d, %v; want 1", slot, err)
	}
	cryptsetup(t, "config", "--priority", "ignore", "--key-slot", "1", img)
	cryptsetup(t, "config", "--priority", "ignore", "--key-slot", "0", img)
	h, f = readHdr(t, img)
	// cryptsetup: "No usable keyslot is available." (exit 1), not a wrong passphrase.
	if _, _, err := h.Unlock(f, pass, -1); err != ErrNoUsableKeyslot {
		t.Fatalf("all slots ignored: %v, want ErrNoUsableKeyslot", err)
	}
	if out, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", kf, img); err == nil || !strings.Contains(out, "No usable keyslot is available.") {
		t.Fatalf("cryptsetup with all slots ignored: %v %q", err, out)
	}
	if _, slot, err := h.Unlock(f, pass, 1); err != nil || slot != 1 {
		t.Fatalf("ignored slot named: slot %d, %v; want 1", slot, err)
	}
	sameLines(t, "priorities", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
}

// TestFormatLayoutMatchesCryptsetup: with the same options (the PBKDF cost
// forced) luksd writes cryptsetup's layout: the same dump and JSON with
// only random fields differing, and the same fixed binary header fields.
func TestFormatLayoutMatchesCryptsetup(t *testing.T) {
	cases := []struct {
		name string
		opts FormatOptions
		args []string
		size int64
	}{
		{"defaults", FormatOptions{}, nil, 0},
		{"unaligned device size", FormatOptions{}, nil, 64<<20 + 512},
		{"metadata 64k keyslots 1m", FormatOptions{MetadataSize: 64 << 10, KeyslotsSize: 1 << 20}, []string{"--luks2-metadata-size", "64k", "--luks2-keyslots-size", "1m"}, 0},
		{"metadata 256k", FormatOptions{MetadataSize: 256 << 10}, []string{"--luks2-metadata-size", "256k"}, 0},
		{"offset 32m", FormatOptions{DataOffset: 32 << 20}, []string{"--offset", "65536"}, 0},
		{"offset 1m", FormatOptions{DataOffset: 1 << 20}, []string{"--offset", "2048"}, 0},
		{"keyslots 2m offset 8m", FormatOptions{KeyslotsSize: 2 << 20, DataOffset: 8 << 20}, []string{"--luks2-keyslots-size", "2m", "--offset", "16384"}, 0},
		{"aes-cbc-essiv 256", FormatOptions{Cipher: "aes-cbc-essiv:sha256", KeySize: 32, Label: "L"}, []string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--label", "L"}, 0},
		{"sector 512", FormatOptions{SectorSize: 512}, []string{"--sector-size", "512"}, 0},
		{"hash sha512", FormatOptions{Hash: "sha512"}, []string{"--hash", "sha512"}, 0},
		{"pbkdf2 sha1", FormatOptions{PBKDF: PBKDF{Type: "pbkdf2", Hash: "sha1", Iterations: 1000}}, []string{"--pbkdf", "pbkdf2", "--hash", "sha1", "--pbkdf-force-iterations", "1000"}, 0},
		{"detached header", FormatOptions{DetachedData: true}, []string{"--header"}, 0},
	}
	pass := []byte("layout")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == 0 {
				size = 64 << 20
			}
			mine, theirs := testtool.Image(t, size), testtool.Image(t, size)
			mineHdr, theirsHdr := mine, theirs
			args := append([]string{"luksFormat", "-q", "--type", "luks2", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32", "--pbkdf-parallel", "2", "--key-file", testtool.KeyFile(t, pass)}, tc.args...)
			if tc.opts.DetachedData {
				mineHdr, theirsHdr = mine+".hdr", theirs+".hdr"
				args = append(args, theirsHdr)
				os.WriteFile(mineHdr, nil, 0o600)
			}
			cryptsetup(t, append(args, theirs)...)
			f, _ := openRW(t, mineHdr)
			if tc.opts.PBKDF.Type == "" {
				tc.opts.PBKDF = PBKDF{Type: "argon2id", Iterations: 4, MemoryKiB: 32, Parallel: 2}
			}
			if _, _, err := Format(f, size, tc.opts, pass); err != nil {
				t.Fatal(err)
			}
			sameLines(t, "layout", normalize(cryptsetup(t, "luksDump", mineHdr)), normalize(cryptsetup(t, "luksDump", theirsHdr)))
			sameLines(t, "JSON", normalize(cryptsetup(t, "luksDump", "--dump-json-metadata", mineHdr)), normalize(cryptsetup(t, "luksDump", "--dump-json-metadata", theirsHdr)))
			a, _ := os.ReadFile(mineHdr)
			b, _ := os.ReadFile(theirsHdr)
			if tc.opts.DetachedData && len(a) != len(b) {
				t.Fatalf("header file is %d bytes, cryptsetup's %d", len(a), len(b))
			}
			hdrSize := int(binaryHdrSize(a))
			for _, off := range []int{0, hdrSize} {
				if !bytes.Equal(a[off:off+24], b[off:off+24]) || !bytes.Equal(a[off+offLabel:off+offSalt], b[off+offLabel:off+offSalt]) ||
					!bytes.Equal(a[off+offSubsystem:off+offCsum], b[off+offSubsystem:off+offCsum]) {
					t.Fatalf("binary header at %d differs from cryptsetup's", off)
				}
			}
			kf := testtool.KeyFile(t, pass)
			open := []string{"open", "--test-passphrase", "--key-file", kf}
			if tc.opts.DetachedData {
				open = append(open, "--header", mineHdr)
			}
			cryptsetup(t, append(open, mine)...)
		})
	}
}

func binaryHdrSize(b []byte) int64 {
	return int64(b[offHdrSize+6])<<8 | int64(b[offHdrSize+5])<<16 | int64(b[offHdrSize+4])<<24 | int64(b[offHdrSize+7])
}

// normalize blanks the random fields of luksDump output.
func normalize(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, k := range []string{"UUID:", "Salt:", "Digest:", "            ", "\"salt\"", "\"digest\""} {
			if strings.Contains(line, k) {
				line = k
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestConvertedLUKS1: a LUKS1 volume converted to LUKS2 by cryptsetup
// (20-byte digest, different key order) unlocks in luksd, and luksd's edit
// keeps its metadata as cryptsetup wrote it.
func TestConvertedLUKS1(t *testing.T) {
	img := testtool.Image(t, 20<<20)
	pass := []byte("converted")
	vk := make([]byte, 64)
	rand.Read(vk)
	cryptsetup(t, "luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000", "--volume-key-file", testtool.KeyFile(t, vk), "--key-file", testtool.KeyFile(t, pass), img)
	h1, f1 := readHdr(t, img)
	if got, _, err := h1.Unlock(f1, pass, -1); err != nil || !bytes.Equal(got, vk) {
		t.Fatalf("LUKS1 unlock: %v", err)
	}
	if _, err := h1.AddKey(f1, vk, pass, -1, cheapArgon2id); !errors.Is(err, ErrLUKS1PBKDF) {
		t.Fatalf("AddKey argon2id on LUKS1: %v, want ErrLUKS1PBKDF", err)
	}
	cryptsetup(t, "convert", "-q", "--type", "luks2", img)
	h, f := readHdr(t, img)
	if d := h.impl.(*header).meta.digests[0]; len(d.digest) != 20 {
		t.Fatalf("converted digest has %d bytes, want 20", len(d.digest))
	}
	got, _, err := h.Unlock(f, pass, -1)
	if err != nil || !bytes.Equal(got, vk) {
		t.Fatalf("Unlock converted header: %v", err)
	}
	if _, err := h.AddKey(f, vk, []byte("added"), -1, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	if string(h.JSON()) != cryptsetup(t, "luksDump", "--dump-json-metadata", img) {
		t.Fatal("JSON() differs from cryptsetup's after the edit")
	}
	if !strings.Contains(string(h.JSON()), "\"key_size\":64,\n        \"offset\":\"32768\"") {
		t.Fatalf("cryptsetup's key order was not kept:\n%s", h.JSON())
	}
	cryptsetup(t, "open", "--test-passphrase", "--key-file", testtool.KeyFile(t, []byte("added")), img)
	sameLines(t, "converted dump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
}

// TestKeyslotPlacementMatchesCryptsetup: after the same add/kill sequence,
// luksd places keyslots where cryptsetup does (first free gap).
func TestKeyslotPlacementMatchesCryptsetup(t *testing.T) {
	pass := []byte("place")
	kf := testtool.KeyFile(t, pass)
	pb := cryptsetupPBKDFArgs(cheapPBKDF2)
	mine, theirs := testtool.Image(t, 20<<20), testtool.Image(t, 20<<20)
	for _, img := range []string{mine, theirs} {
		cryptsetup(t, append(append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", kf}, pb...), img)...)
	}
	// cryptsetup: add slots 1 and 2, kill 1, add (lands in slot 1's gap), add 3.
	for _, step := range [][]string{{"add"}, {"add"}, {"kill", "1"}, {"add", "5"}, {"add"}} {
		if step[0] == "kill" {
			cryptsetup(t, "luksKillSlot", "-q", theirs, step[1])
			continue
		}
		args := append([]string{"luksAddKey", "-q", "--key-file", kf}, pb...)
		if len(step) > 1 {
			args = append(args, "--new-key-slot", step[1])
		}
		cryptsetup(t, append(args, theirs, kf)...)
	}
	h, f := readHdr(t, mine)
	vk, _, err := h.Unlock(f, pass, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		kill bool
		slot int
	}{{false, -1}, {false, -1}, {true, 1}, {false, 5}, {false, -1}} {
		if step.kill {
			err = h.KillSlot(f, step.slot)
		} else {
			_, err = h.AddKey(f, vk, pass, step.slot, cheapPBKDF2)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sameLines(t, "placement", normalize(cryptsetup(t, "luksDump", mine)), normalize(cryptsetup(t, "luksDump", theirs)))
	sameLines(t, "placement JSON", normalize(cryptsetup(t, "luksDump", "--dump-json-metadata", mine)),
		normalize(cryptsetup(t, "luksDump", "--dump-json-metadata", theirs)))
}
