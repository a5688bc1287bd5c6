package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestNumericOptionsLikeCryptsetup: every kind of numeric option (uint32,
// int32, uint64, size with units) takes and refuses what cryptsetup
// 2.6.1's parser does, with its words, checked with --test-args.
func TestNumericOptionsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("num.img")
	numbers := []string{"", "abc", "5x", " 5", "+5", "-5", "-0", "0x10", "2147483647", "2147483648",
		"-2147483648", "-2147483649", "4294967295", "4294967296", "4294967300", "4294968296",
		"18446744073709551615", "18446744073709551616"}
	sizes := []string{"16384", "16k", "16K", "16kB", "16KB", "16KiB", "16kiB", "16Kib", "16kb", "32s", "1sB",
		"1m", "4M", "2MiB", "1g", "1T", "99999999999T", " 16k", "+16k", "16 k", "k", "", "-1"}
	for _, tc := range []struct {
		verb, option string
		values       []string
		extra        []string
	}{
		{verb: "luksFormat", option: "--pbkdf-force-iterations", values: numbers}, // uint32
		{verb: "luksConvertKey", option: "--pbkdf-force-iterations", values: numbers},
		{verb: "luksChangeKey", option: "--pbkdf-memory", values: numbers},
		{verb: "luksAddKey", option: "--iter-time", values: numbers},
		{verb: "luksAddKey", option: "--keyfile-size", values: numbers},
		{verb: "luksFormat", option: "--key-size", values: numbers},
		{verb: "luksFormat", option: "--key-size", values: []string{"5", "8", "0", "264"}},
		{verb: "luksFormat", option: "--sector-size", values: []string{"0", "256", "512", "1024", "1536", "4096", "8192"}},
		{verb: "config", option: "--priority", values: []string{"normal", "prefer", "ignore", "Prefer", "", "x"}, extra: []string{"-S", "0"}},
		{verb: "luksDump", option: "-S", values: numbers}, // int32
		{verb: "luksAddKey", option: "--new-key-slot", values: numbers},
		{verb: "luksAddKey", option: "--keyfile-offset", values: numbers}, // uint64
		{verb: "luksFormat", option: "--offset", values: numbers},
		{verb: "luksFormat", option: "--luks2-metadata-size", values: sizes}, // sizes
		{verb: "luksFormat", option: "--luks2-keyslots-size", values: sizes},
		{verb: "open", option: "--device-size", values: sizes},
	} {
		for _, v := range tc.values {
			args := append([]string{"--test-args", tc.verb, tc.option, v, img}, tc.extra...)
			cs, ld := w.cs(nil, args...), w.luksd(nil, args...)
			if tc.option == "--device-size" && cs.code == 0 {
				// luksd maps part of a device only in plain mode:
				// refused for LUKS, not ignored.
				ld.expect(t, 1, "Option --device-size is not supported by luksd for LUKS devices.")
				continue
			}
			// cryptsetup prefixes its usage errors with its path.
			if ld.code != cs.code || cs.code != 0 && !strings.HasSuffix(lastLine(cs.stderr), lastLine(ld.stderr)) {
				t.Errorf("%s %s %q: luksd exit %d %q, cryptsetup exit %d %q", tc.verb, tc.option, v,
					ld.code, lastLine(ld.stderr), cs.code, lastLine(cs.stderr))
			}
		}
	}
	// The value reaches the verb as cryptsetup read it.
	for _, tc := range []struct{ option, value, want string }{
		{"--luks2-metadata-size", "64k", "Metadata area: \t65536 [bytes]"},
		{"--luks2-keyslots-size", "2M", "Keyslots area: \t2097152 [bytes]"},
	} {
		a, b := w.image("cs.img"), w.image("ld.img")
		key := w.key("key", "pw")
		args := append([]string{"luksFormat", "-q", tc.option, tc.value}, cheapPBKDF("pbkdf2")...)
		w.cs(nil, append(args, a, key)...).ok(t)
		w.luksd(nil, append(args, b, key)...).ok(t)
		for tool, img := range map[string]string{"cryptsetup": a, "luksd": b} {
			if out := w.cs(nil, "luksDump", img).ok(t).stdout; !containsLine(out, tc.want) {
				t.Errorf("%s luksFormat %s %s: dump lacks %q", tool, tc.option, tc.value, tc.want)
			}
		}
	}
}

func containsLine(text, line string) bool {
	return slices.Contains(strings.Split(text, "\n"), line)
}

// TestPBKDFLimitsLikeCryptsetup: PBKDF parameters cryptsetup refuses are
// refused with its reason (its second line, "Failed to set pbkdf
// parameters.", is not luksd's), before anything is written; forced
// iterations above what a 32-bit field holds never reach the header.
func TestPBKDFLimitsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("pbkdf.img"), w.key("key", "pw")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	for _, args := range [][]string{
		{"luksAddKey", "--pbkdf-force-iterations", "3"},
		{"luksAddKey", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "999"},
		{"luksAddKey", "--pbkdf-memory", "4194305"},
		{"luksAddKey", "--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "31"},
		{"luksChangeKey", "--pbkdf-memory", "4194305"},
		{"luksConvertKey", "-S", "0", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "4294967300"},
		{"luksChangeKey", "-S", "0", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "4294967300"},
		{"luksFormat", "--pbkdf-force-iterations", "4294968296"},
	} {
		args = append(append(args, "-q", "-d", key, "IMG"), key)
		if args[0] == "luksConvertKey" {
			args = args[:len(args)-1]
		}
		cs, ld, csImg, ldImg := w.twinRun(img, args...)
		if ld.code != cs.code || !strings.Contains(cs.stderr, strings.TrimSpace(ld.stderr)) || strings.Count(strings.TrimSpace(ld.stderr), "\n") > 0 {
			t.Errorf("%v: luksd exit %d %q, cryptsetup exit %d %q", args, ld.code, ld.stderr, cs.code, cs.stderr)
		}
		orig, _ := os.ReadFile(img)
		if cs.code != 0 && (!bytes.Equal(ldImg, orig) || !bytes.Equal(csImg, orig)) {
			t.Errorf("%v: a refused edit wrote to the image", args)
		}
	}
}

// TestSmallKeyslotsAreaLikeCryptsetup: a keyslots area under 4 MiB gets
// cryptsetup's warning, and a full one its "No space for new keyslot.".
func TestSmallKeyslotsAreaLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	blank := w.image("blank.img")
	for _, size := range [][]string{{"--luks2-keyslots-size", "128k"}, {"--luks2-keyslots-size", "1M"}, {"--offset", "2048"}, {"--luks2-keyslots-size", "4063232"}} {
		args := append(append(append([]string{"luksFormat", "-q"}, size...), cheapPBKDF("pbkdf2")...), "IMG", key)
		cs, ld, csImg, _ := w.twinRun(blank, args...)
		w.sameAs(fmt.Sprint(size), cs, ld)
		if cs.code != 0 || size[1] != "2048" {
			continue
		}
		// Two keyslots fit beside the first; the fourth finds no room.
		img := w.path("small.img")
		os.WriteFile(img, csImg, 0o600)
		for i := 0; i < 3; i++ {
			add := append(append([]string{"luksAddKey", "-q"}, cheapPBKDF("pbkdf2")...), "-d", key, "IMG", key)
			cs, ld, csImg, _ := w.twinRun(img, add...)
			w.sameAs(fmt.Sprintf("luksAddKey %d", i), cs, ld)
			os.WriteFile(img, csImg, 0o600)
		}
	}
}
