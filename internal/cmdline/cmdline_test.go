package cmdline

import (
	"errors"
	"slices"
	"testing"
)

// cmd/luksd's TestNumericOptionsLikeCryptsetup checks these rules against
// cryptsetup itself; this test pins the grammar down where it lives.

func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		in   string
		want string // "" = refused
	}{
		{Uint32, "5", "5"}, {Uint32, " 5", "5"}, {Uint32, "+5", "5"}, {Uint32, "-0", "0"},
		{Uint32, "4294967295", "4294967295"}, {Uint32, "4294967296", ""}, {Uint32, "-5", ""},
		{Uint32, "", ""}, {Uint32, "5x", ""}, {Uint32, "0x10", ""},
		{Uint64, "-1", "18446744073709551615"}, {Uint64, "18446744073709551616", ""},
		{Int32, "-2147483648", "-2147483648"}, {Int32, "2147483648", ""}, {Int32, "-2147483649", ""},
		{Size, "16k", "16384"}, {Size, "16kB", "16000"}, {Size, "16KiB", "16384"}, {Size, "32s", "16384"},
		{Size, "1sB", "512"}, {Size, "2M", "2097152"}, {Size, "1T", "1099511627776"},
		{Size, "16Kib", ""}, {Size, "16kb", ""}, {Size, " 16k", ""}, {Size, "+16k", ""}, {Size, "k", ""},
		{Size, "-1", ""}, {Size, "99999999999T", ""},
	} {
		got, err := ParseNumber(tc.kind, tc.in, "opt")
		if tc.want == "" {
			if err == nil {
				t.Errorf("ParseNumber(%d, %q) = %q, want an error", tc.kind, tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseNumber(%d, %q) = %q, %v; want %q", tc.kind, tc.in, got, err, tc.want)
		}
	}
	if _, err := ParseNumber(Size, "1x", "luks2-metadata-size"); err == nil ||
		err.Error() != "Invalid size specification in parameter --luks2-metadata-size." {
		t.Errorf("bad size: %v", err)
	}
	if _, err := ParseNumber(Uint32, "x", "iter-time"); !errors.Is(err, ErrNumber) {
		t.Errorf("bad number: %v", err)
	}
}

func TestScan(t *testing.T) {
	names := map[string]Kind{"batch-mode": None, "verbose": None, "key-slot": Int32, "key-file": Text}
	shorts := map[byte]string{'q': "batch-mode", 'v': "verbose", 'S': "key-slot", 'd': "key-file"}
	scan := func(args ...string) (*Scanner, string, error) {
		sc := &Scanner{Names: names, Shorts: shorts, Check: func(o *Option, k Kind) error {
			if k == Int32 {
				v, err := ParseNumber(k, o.Value, o.Name)
				o.Value = v
				return err
			}
			return nil
		}}
		special, _, err := sc.Scan(args)
		return sc, special, err
	}
	sc, _, err := scan("-qvS05", "luksDump", "dev", "--key-file", "-", "-d=k", "--", "-x")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range sc.Opts {
		got = append(got, o.Name+"="+o.Value)
	}
	if want := []string{"batch-mode=", "verbose=", "key-slot=5", "key-file=-", "key-file=k"}; !slices.Equal(got, want) {
		t.Errorf("options %q, want %q", got, want)
	}
	if want := []string{"luksDump", "dev", "-x"}; !slices.Equal(sc.Pos, want) {
		t.Errorf("positionals %q, want %q", sc.Pos, want)
	}
	for args, want := range map[string]string{
		"--frobnicate":   "--frobnicate: unknown option",
		"--verbose=1":    "--verbose=1: option does not take an argument",
		"--key-file":     "--key-file: missing argument",
		"-S":             "-S: missing argument",
		"-qx":            "-qx: unknown option",
		"--key-slot=1.5": "invalid numeric value",
	} {
		if _, _, err := scan(args); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if _, special, err := scan("open", "-?", "--frobnicate"); err != nil || special != "help" {
		t.Errorf("-?: special %q, err %v", special, err)
	}
}
