package luks2

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// normalizeLUKS1 blanks the random fields of a LUKS1 luksDump: UUID,
// digest, salts and their continuation lines.
func normalizeLUKS1(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, k := range []string{"UUID:", "MK digest:", "MK salt:", "\tSalt:", "               \t", "\t                      \t", "LUKS header information"} {
			if strings.HasPrefix(line, k) {
				line = k
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// luks1Fixed blanks the random fields of a raw LUKS1 header.
func luks1Fixed(raw []byte) []byte {
	b := bytes.Clone(raw[:4096])
	clear(b[112:164]) // digest, salt
	clear(b[168:208]) // UUID
	for i := 0; i < luks1NumKeys; i++ {
		clear(b[luks1KeyblockBase+i*luks1KeyblockSize+8 : luks1KeyblockBase+i*luks1KeyblockSize+40])
	}
	return b
}

// TestFormatLUKS1LikeCryptsetup: Format with Version 1 writes the header
// cryptsetup's luksFormat --type luks1 writes for the same options, byte
// for byte but for random fields, and cryptsetup opens it to the same key.
func TestFormatLUKS1LikeCryptsetup(t *testing.T) {
	cases := []struct {
		name string
		opts FormatOptions
		args []string
	}{
		{"default", FormatOptions{}, nil},
		{"xts-256-slot3", FormatOptions{KeySize: 32, Keyslot: 3}, []string{"--key-size", "256", "--key-slot", "3"}},
		{"essiv-sha1", FormatOptions{Cipher: "aes-cbc-essiv:sha256", KeySize: 32, Hash: "sha1"},
			[]string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--hash", "sha1"}},
		{"cbc-128-sha512-offset", FormatOptions{Cipher: "aes-cbc-plain64", KeySize: 16, Hash: "sha512", DataOffset: 3000 * 512},
			[]string{"--cipher", "aes-cbc-plain64", "--key-size", "128", "--hash", "sha512", "--offset", "3000"}},
		{"align-1", FormatOptions{KeySize: 32, PayloadAlign: 512}, []string{"--key-size", "256", "--align-payload", "1"}},
		{"align-3000", FormatOptions{PayloadAlign: 3000 * 512}, []string{"--align-payload", "3000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pass := []byte("luks1 " + tc.name)
			kf := testtool.KeyFile(t, pass)
			mine, theirs := testtool.Image(t, 8<<20), testtool.Image(t, 8<<20)
			keySize := tc.opts.KeySize
			if keySize == 0 {
				keySize = 64
			}
			vk := make([]byte, keySize)
			rand.Read(vk)
			args := append([]string{"luksFormat", "-q", "--type", "luks1", "--pbkdf-force-iterations", "1000",
				"--volume-key-file", testtool.KeyFile(t, vk), "--key-file", kf}, tc.args...)
			cryptsetup(t, append(args, theirs)...)

			f, size := openRW(t, mine)
			opts := tc.opts
			opts.Version = 1
			opts.VolumeKey = vk
			opts.PBKDF = PBKDF{Iterations: 1000}
			h, got, err := Format(f, size, opts, pass)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, vk) || h.Version() != 1 {
				t.Fatalf("Format returned version %d, key %x", h.Version(), got)
			}
			sameLines(t, "luksDump", normalizeLUKS1(cryptsetup(t, "luksDump", mine)), normalizeLUKS1(cryptsetup(t, "luksDump", theirs)))
			sameLines(t, "luksd's dump", dumpText(t, h, DumpOptions{Device: mine}), cryptsetup(t, "luksDump", mine))
			a, _ := os.ReadFile(mine)
			b, _ := os.ReadFile(theirs)
			if !bytes.Equal(luks1Fixed(a), luks1Fixed(b)) {
				t.Fatal("the header's fixed fields differ from cryptsetup's")
			}
			// The header area up to the payload: zero but for the header and
			// key material, as cryptsetup leaves it.
			payload := int(h.impl.(*luks1Header).payloadOffset) * 512
			for i := 512; i < payload; i += 512 {
				inArea := false
				for _, s := range h.impl.(*luks1Header).slots {
					if i >= int(s.offset)*512 && i < int(s.offset)*512+afSize(keySize, luks1Stripes) {
						inArea = true
					}
				}
				from := max(i, luks1HeaderSize)
				zeroA, zeroB := isZero(a[from:i+512]), isZero(b[from:i+512])
				if zeroA != zeroB || inArea == zeroA {
					t.Fatalf("offset %d: zero %v, cryptsetup's zero %v, in a keyslot area %v", i, zeroA, zeroB, inArea)
				}
			}
			slot := max(tc.opts.Keyslot, 0)
			if s := opensSlot(t, mine, pass); s != slot {
				t.Fatalf("cryptsetup opens slot %d, want %d", s, slot)
			}
			if got := cryptsetupVolumeKey(t, mine, kf); !bytes.Equal(got, vk) {
				t.Fatal("cryptsetup finds another volume key")
			}
			cryptsetup(t, "luksAddKey", "-q", "--pbkdf-force-iterations", "1000", "--key-file", kf, mine, testtool.KeyFile(t, []byte("more")))
		})
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestFormatLUKS1Calibrated: without forced iterations both the digest and
// the keyslot get at least LUKS1's 1000 iterations, from calibration.
func TestFormatLUKS1Calibrated(t *testing.T) {
	withModel(t, func(p kdfParams) time.Duration { return time.Duration(p.iterations) * time.Microsecond })
	img := testtool.Image(t, 8<<20)
	f, size := openRW(t, img)
	pass := []byte("calibrated")
	h, _, err := Format(f, size, FormatOptions{Version: 1, PBKDF: PBKDF{IterTime: 5 * time.Millisecond}}, pass)
	if err != nil {
		t.Fatal(err)
	}
	v1 := h.impl.(*luks1Header)
	// The model: 125 ms for the digest, 5 ms (below the minimum) for the slot.
	if v1.mkDigestIter != 125000 || v1.slots[0].iterations != 5000 {
		t.Fatalf("digest %d, keyslot %d iterations; want 125000 and 5000", v1.mkDigestIter, v1.slots[0].iterations)
	}
	dump := cryptsetup(t, "luksDump", img)
	if !strings.Contains(dump, "MK iterations: \t125000") || !strings.Contains(dump, "Iterations:         \t5000") {
		t.Fatalf("cryptsetup's dump:\n%s", dump)
	}
	if s := opensSlot(t, img, pass); s != 0 {
		t.Fatalf("cryptsetup opens slot %d", s)
	}
}

// TestFormatLUKS1Refusals: what LUKS1 cannot hold is refused before the
// device is written.
func TestFormatLUKS1Refusals(t *testing.T) {
	img := testtool.Image(t, 8<<20)
	f, size := openRW(t, img)
	for i, opts := range []FormatOptions{
		{PBKDF: cheapArgon2id},
		{Label: "x"},
		{Subsystem: "x"},
		{SectorSize: 4096},
		{MetadataSize: 16 << 10},
		{Keyslot: 8},
		{DataOffset: 100 * 512},
		{Hash: "md5"},
		{Cipher: "aes-ecb"},
		{KeySize: 20},
	} {
		opts.Version = 1
		opts.PBKDF.Iterations = max(opts.PBKDF.Iterations, 1000)
		if _, _, err := Format(f, size, opts, []byte("x")); err == nil {
			t.Errorf("case %d (%+v): formatted", i, opts)
		} else if i == 0 && !errors.Is(err, ErrLUKS1PBKDF) {
			t.Errorf("argon2id: %v, want ErrLUKS1PBKDF", err)
		}
		if now, _ := os.ReadFile(img); !isZero(now) {
			t.Fatalf("case %d: a refused format wrote to the device", i)
		}
	}
	for i, opts := range []FormatOptions{
		{PBKDF: PBKDF{Type: "pbkdf2", Iterations: 999}},
		{PayloadAlign: 100},
		{PayloadAlign: 4096, DataOffset: 4096 * 512},
	} {
		opts.Version = 1
		if _, _, err := Format(f, size, opts, []byte("x")); err == nil {
			t.Errorf("case %d (%+v): formatted", i, opts)
		}
		if now, _ := os.ReadFile(img); !isZero(now) {
			t.Fatalf("case %d (%+v): a refused format wrote to the device", i, opts)
		}
	}
	if _, _, err := Format(f, 1<<20, FormatOptions{Version: 1, PBKDF: cheapPBKDF2}, []byte("x")); err == nil {
		t.Error("formatted a 1 MiB device (the header needs 2 MiB)")
	}
	if _, _, err := Format(f, size, FormatOptions{Version: 3}, []byte("x")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Version 3: %v", err)
	}
}
