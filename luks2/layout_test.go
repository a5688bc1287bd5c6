package luks2

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// TestDefaultsLikeCryptsetup: for image files of a few sizes and options,
// cryptsetup's luksFormat lays the volume out where FormatLayout says and
// picks the sector size and key size DefaultSectorSize and DefaultKeySize
// say.
func TestDefaultsLikeCryptsetup(t *testing.T) {
	for _, tc := range []struct {
		size int64
		opts FormatOptions
		args []string
	}{
		{20 << 20, FormatOptions{}, nil},
		{20<<20 + 512, FormatOptions{}, nil},
		{20 << 20, FormatOptions{DataOffset: 34816 * 512}, []string{"--offset", "34816"}},
		{40 << 20, FormatOptions{DataOffset: 32768 * 512}, []string{"--offset", "32768"}},
		{20 << 20, FormatOptions{PayloadAlign: 8 * 512}, []string{"--align-payload", "8"}},
		{20 << 20, FormatOptions{PayloadAlign: 3 * 512}, []string{"--align-payload", "3"}},
		{20 << 20, FormatOptions{KeyslotsSize: 2 << 20}, []string{"--luks2-keyslots-size", "2m"}},
		{20 << 20, FormatOptions{Cipher: "aes-cbc-essiv:sha256"}, []string{"--cipher", "aes-cbc-essiv:sha256"}},
		{20 << 20, FormatOptions{Version: 1}, []string{"--type", "luks1"}},
		{20 << 20, FormatOptions{Version: 1, PayloadAlign: 4096 * 512}, []string{"--type", "luks1", "--align-payload", "4096"}},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			img := testtool.Image(t, tc.size)
			args := append([]string{"luksFormat", "-q", "--key-file", testtool.KeyFile(t, []byte("p"))}, cryptsetupPBKDFArgs(cheapPBKDF2)...)
			cryptsetup(t, append(append(args, tc.args...), img)...)
			dump := cryptsetup(t, "luksDump", img)
			l, err := FormatLayout(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.opts.Version == 1 {
				dumpHas(t, dump, `Payload offset:\s+(\d+)`, l.DataOffset/512)
				dumpHas(t, dump, `MK bits:\s+(\d+)`, int64(DefaultKeySize(tc.opts.Cipher)*8))
				if s := DefaultSectorSize(tc.size, tc.opts); s != 512 {
					t.Errorf("LUKS1 sector size %d", s)
				}
				return
			}
			dumpHas(t, dump, `offset: (\d+) \[bytes\]`, l.DataOffset)
			dumpHas(t, dump, `Keyslots area: \s*(\d+)`, l.KeyslotsSize)
			dumpHas(t, dump, `Metadata area: \s*(\d+)`, l.MetadataSize)
			dumpHas(t, dump, `sector: (\d+) \[bytes\]`, int64(DefaultSectorSize(tc.size, tc.opts)))
			dumpHas(t, dump, `Key:\s+(\d+) bits`, int64(DefaultKeySize(tc.opts.Cipher)*8))
		})
	}
}

// dumpHas checks the first number pattern finds in dump.
func dumpHas(t *testing.T, dump, pattern string, want int64) {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(dump)
	if m == nil {
		t.Fatalf("no %q in:\n%s", pattern, dump)
	}
	if got, _ := strconv.ParseInt(m[1], 10, 64); got != want {
		t.Errorf("cryptsetup's %q is %d; luks2 says %d", pattern, got, want)
	}
}

// TestFormatFollowsItsLayout: Format puts the data where FormatLayout
// says, with DefaultKeySize and DefaultSectorSize.
func TestFormatFollowsItsLayout(t *testing.T) {
	const size = 40 << 20
	for _, opts := range []FormatOptions{
		{},
		{PayloadAlign: 3 * 512},
		{DataOffset: 1 << 20},
		{Cipher: "xchacha12,aes-adiantum-plain64"},
		{Version: 1},
		{Version: 1, PayloadAlign: 8 * 512},
		{Version: 1, PayloadAlign: 4096 * 512, DetachedData: true},
	} {
		opts.PBKDF = cheapPBKDF2
		l, err := FormatLayout(opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		h, vk, err := Format(devtest.NewMem(size), size, opts, []byte("p"))
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		seg, err := h.Segment()
		if err != nil {
			t.Fatal(err)
		}
		want := Segment{Offset: l.DataOffset, Cipher: seg.Cipher, KeySize: DefaultKeySize(opts.Cipher), SectorSize: DefaultSectorSize(size, opts)}
		if seg != want || len(vk) != want.KeySize {
			t.Errorf("%+v: segment %+v, want %+v", opts, seg, want)
		}
	}
}

func TestLayoutRefusals(t *testing.T) {
	for _, opts := range []FormatOptions{
		{PayloadAlign: 4096, DataOffset: 32 << 20},
		{PayloadAlign: 4096, DetachedData: true},
		{PayloadAlign: 4096, KeyslotsSize: 1 << 20},
		{PayloadAlign: -512},
		{MetadataSize: 20 << 10},
		{Version: 1, Cipher: "aes-ecb"},
	} {
		if l, err := FormatLayout(opts); err == nil {
			t.Errorf("%+v: laid out as %+v", opts, l)
		}
	}
}

func TestLayoutPredicates(t *testing.T) {
	for cipher, want := range map[string]int{
		"": 64, "aes-xts-plain64": 64, "aes-xts": 64, "serpent-xts-plain": 64,
		"aes-cbc-essiv:sha256": 32, "xchacha12,aes-adiantum-plain64": 32, "aes-cbc-xts": 32,
	} {
		if got := DefaultKeySize(cipher); got != want {
			t.Errorf("DefaultKeySize(%q) = %d, want %d", cipher, got, want)
		}
	}
	for _, tc := range []struct {
		version, n int
		ok         bool
	}{{2, 512, true}, {2, 1024, true}, {2, 4096, true}, {2, 8192, false}, {2, 256, false}, {2, 1536, false},
		{1, 512, true}, {1, 4096, false}} {
		if ValidSectorSize(tc.version, tc.n) != tc.ok {
			t.Errorf("ValidSectorSize(%d, %d) = %v", tc.version, tc.n, !tc.ok)
		}
	}
	if !DataOffsetAligned(16<<20) || DataOffsetAligned(16<<20+512) {
		t.Error("DataOffsetAligned")
	}
	if (Layout{KeyslotsSize: 4<<20 - 36<<10}).SmallKeyslotsArea() != true || (Layout{KeyslotsSize: 4<<20 - 32<<10}).SmallKeyslotsArea() {
		t.Error("SmallKeyslotsArea: cryptsetup warns below 4 MiB less 32 KiB")
	}
	if !ValidUUID("0BADCAFE-1234-4321-8765-0123456789ab") || ValidUUID("0badcafe-1234-4321-8765-0123456789a") {
		t.Error("ValidUUID")
	}
}

func TestCheckPBKDF(t *testing.T) {
	limit := func(typ string, l PBKDFLimit, v int) error { return &PBKDFLimitError{Type: typ, Limit: l, Value: v} }
	for _, tc := range []struct {
		p       PBKDF
		version int
		want    error
	}{
		{PBKDF{}, 2, nil},
		{PBKDF{Type: "argon2id"}, 1, ErrLUKS1PBKDF},
		{PBKDF{Iterations: 999}, 1, limit("pbkdf2", LimitIterations, 1000)},
		{PBKDF{Type: "pbkdf2", Iterations: 1000, MemoryKiB: 1 << 30}, 2, nil},
		{PBKDF{Iterations: 3}, 2, limit("argon2id", LimitIterations, 4)},
		{PBKDF{Type: "argon2i", Iterations: 4, MemoryKiB: 31}, 2, limit("argon2i", LimitMemory, 32)},
		{PBKDF{Type: "argon2i", MemoryKiB: 31}, 2, nil},
		{PBKDF{MemoryKiB: 4<<20 + 1}, 2, limit("argon2id", LimitMaxMemory, 4<<20)},
	} {
		err := CheckPBKDF(tc.p, tc.version)
		if fmt.Sprint(err) != fmt.Sprint(tc.want) {
			t.Errorf("CheckPBKDF(%+v, %d) = %v, want %v", tc.p, tc.version, err, tc.want)
		}
		var le *PBKDFLimitError
		if errors.As(tc.want, &le) && !errors.Is(err, ErrPBKDF) {
			t.Errorf("%v is not ErrPBKDF", err)
		}
	}
	if err := CheckPBKDF(PBKDF{Type: "scrypt"}, 2); !errors.Is(err, ErrUnsupported) {
		t.Errorf("scrypt: %v", err)
	}
}

func TestLUKSSignatures(t *testing.T) {
	const size = 20 << 20
	if s := LUKSSignatures(devtest.NewMem(size)); s != nil {
		t.Errorf("blank device: %v", s)
	}
	for _, tc := range []struct {
		opts FormatOptions
		want string
	}{
		{FormatOptions{}, "[0 16384]"},
		{FormatOptions{MetadataSize: 64 << 10}, "[0 65536]"},
		{FormatOptions{Version: 1}, "[0]"},
	} {
		dev := devtest.NewMem(size)
		tc.opts.PBKDF = cheapPBKDF2
		if _, _, err := Format(dev, size, tc.opts, []byte("p")); err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(LUKSSignatures(dev)); s != tc.want {
			t.Errorf("%+v: signatures at %s, want %s", tc.opts, s, tc.want)
		}
	}
}
