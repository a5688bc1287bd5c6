package keyring

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pipeWith returns the read end of a pipe that yields data and then EOF.
func pipeWith(t *testing.T, data []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(data)
		w.Close()
	}()
	t.Cleanup(func() { r.Close() })
	return r
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPass(t *testing.T, s Source) []byte {
	t.Helper()
	k, err := s.Passphrase("unused: ", false)
	if err != nil {
		t.Fatalf("Passphrase: %v", err)
	}
	defer k.Wipe()
	return append([]byte(nil), k.Bytes()...)
}

func TestKeyFileWholeNoNewlineProcessing(t *testing.T) {
	data := []byte("line one\nline two\n\x00binary")
	got := mustPass(t, Source{KeyFile: writeFile(t, data)})
	if !bytes.Equal(got, data) {
		t.Fatalf("got %q, want %q", got, data)
	}
}

func TestKeyFileOffsetAndSize(t *testing.T) {
	p := writeFile(t, []byte("0123456789abcdef"))
	if got := mustPass(t, Source{KeyFile: p, Offset: 4, Size: 6}); string(got) != "456789" {
		t.Fatalf("offset 4 size 6: got %q", got)
	}
	if got := mustPass(t, Source{KeyFile: p, Offset: 10}); string(got) != "abcdef" {
		t.Fatalf("offset 10: got %q", got)
	}
	_, err := Source{KeyFile: p, Offset: 10, Size: 7}.Passphrase("", false)
	if err == nil || !strings.Contains(err.Error(), "Cannot read requested amount of data.") {
		t.Fatalf("short key file: err = %v", err)
	}
}

func TestKeyFileLimits(t *testing.T) {
	big := make([]byte, MaxKeyFileSize+1)
	_, err := Source{KeyFile: writeFile(t, big)}.Passphrase("", false)
	if err == nil || !strings.Contains(err.Error(), "Maximum keyfile size exceeded.") {
		t.Fatalf("8 MiB + 1: err = %v", err)
	}
	// Exactly the limit is fine, and so is an explicit larger --keyfile-size.
	if got := mustPass(t, Source{KeyFile: writeFile(t, big[:MaxKeyFileSize])}); len(got) != MaxKeyFileSize {
		t.Fatalf("8 MiB: got %d bytes", len(got))
	}
	if got := mustPass(t, Source{KeyFile: writeFile(t, big), Size: int64(len(big))}); len(got) != len(big) {
		t.Fatalf("--keyfile-size 8 MiB+1: got %d bytes", len(got))
	}
	// An empty regular file is an empty passphrase (cryptsetup then says
	// the passphrase is wrong); an empty pipe is "Nothing to read on input."
	if got := mustPass(t, Source{KeyFile: writeFile(t, nil)}); len(got) != 0 {
		t.Fatalf("empty key file: got %q", got)
	}
	_, err = Source{KeyFile: "-", Stdin: pipeWith(t, nil)}.Passphrase("", false)
	if !errors.Is(err, ErrNoInput) {
		t.Fatalf("empty pipe: err = %v", err)
	}
	// An empty regular file redirected to standard input is no input, as
	// with cryptsetup (with and without --key-file -).
	for _, kf := range []string{"", "-"} {
		empty, err := os.Open(writeFile(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Source{KeyFile: kf, Stdin: empty}.Passphrase("", false)
		empty.Close()
		if !errors.Is(err, ErrNoInput) {
			t.Fatalf("empty regular file on stdin (--key-file %q): err = %v", kf, err)
		}
	}
	_, err = Source{KeyFile: filepath.Join(t.TempDir(), "absent")}.Passphrase("", false)
	if err == nil || err.Error() != "Failed to open key file." {
		t.Fatalf("missing key file: err = %v", err)
	}
}

func TestStdinKeyFileIsWholeInput(t *testing.T) {
	data := []byte("pass\nmore\n")
	got := mustPass(t, Source{KeyFile: "-", Stdin: pipeWith(t, data)})
	if !bytes.Equal(got, data) {
		t.Fatalf("got %q, want %q", got, data)
	}
	// --keyfile-offset on a pipe reads and discards.
	got = mustPass(t, Source{KeyFile: "-", Offset: 5, Size: 4, Stdin: pipeWith(t, data)})
	if string(got) != "more" {
		t.Fatalf("offset on a pipe: got %q", got)
	}
}

func TestPipedPassphraseIsOneLine(t *testing.T) {
	in := pipeWith(t, []byte("first line\nsecond\n"))
	got := mustPass(t, Source{Stdin: in})
	if string(got) != "first line" {
		t.Fatalf("got %q, want %q", got, "first line")
	}
	// Nothing past the newline was consumed.
	rest, _ := io.ReadAll(in)
	if string(rest) != "second\n" {
		t.Fatalf("rest of stdin = %q", rest)
	}
	if got := mustPass(t, Source{Stdin: pipeWith(t, []byte("no newline"))}); string(got) != "no newline" {
		t.Fatalf("got %q", got)
	}
	// An empty line is an empty passphrase; no input at all is an error.
	if got := mustPass(t, Source{Stdin: pipeWith(t, []byte("\n"))}); len(got) != 0 {
		t.Fatalf("empty line: got %q", got)
	}
	if _, err := (Source{Stdin: pipeWith(t, nil)}).Passphrase("", false); !errors.Is(err, ErrNoInput) {
		t.Fatalf("no input: err = %v", err)
	}
	if (Source{Stdin: in}).Interactive() {
		t.Fatal("a pipe is not interactive")
	}
}

func TestLongPipedPassphraseGrows(t *testing.T) {
	long := bytes.Repeat([]byte("p"), 3*4096+17)
	got := mustPass(t, Source{Stdin: pipeWith(t, append(long, '\n'))})
	if !bytes.Equal(got, long) {
		t.Fatalf("got %d bytes, want %d", len(got), len(long))
	}
}

func TestOffsetsAndSizesLikeCryptsetup(t *testing.T) {
	p := writeFile(t, []byte("xxpwyy"))
	for _, c := range []struct {
		name string
		src  Source
		want string // passphrase, or error text
	}{
		{"file offset to the end", Source{KeyFile: p, Offset: 6}, ""},
		{"file offset past the end", Source{KeyFile: p, Offset: 7}, "Cannot seek to requested keyfile offset."},
		{"pipe offset to the end", Source{KeyFile: "-", Offset: 6, Stdin: pipeWith(t, []byte("xxpwyy"))}, "Nothing to read on input."},
		{"pipe offset past the end", Source{KeyFile: "-", Offset: 10, Stdin: pipeWith(t, []byte("xxpwyy"))}, "Cannot seek to requested keyfile offset."},
		{"line with size", Source{Size: 2, Stdin: pipeWith(t, []byte("pwx\n"))}, "pw"},
		{"line shorter than size", Source{Size: 3, Stdin: pipeWith(t, []byte("pw\n"))}, "Cannot read requested amount of data."},
		{"line with offset", Source{Offset: 1, Stdin: pipeWith(t, []byte("xpw\n"))}, "pw"},
		{"line offset eats the newline", Source{Offset: 3, Stdin: pipeWith(t, []byte("xx\n"))}, "Nothing to read on input."},
		{"empty line", Source{Stdin: pipeWith(t, []byte("\n"))}, ""},
	} {
		k, err := c.src.Passphrase("", false)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = string(k.Bytes())
			k.Wipe()
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
