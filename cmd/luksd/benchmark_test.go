package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// TestBenchmarkFormat checks the rows and headers against cryptsetup's
// printf formats, for one cipher (its aligned header) and one PBKDF.
func TestBenchmarkFormat(t *testing.T) {
	luksd := testtool.Luksd(t)
	out, err := exec.Command(luksd, "benchmark", "--cipher", "aes-xts", "--key-size", "512", "--sector-size", "4096").CombinedOutput()
	if err != nil {
		t.Fatalf("benchmark --cipher: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^# Tests are approximate using memory only \(no storage IO\)\.$`),
		regexp.MustCompile(`^# Algorithm \|       Key \|      Encryption \|      Decryption$`),
		regexp.MustCompile(`^    aes-xts        512b  [ 0-9]{8}\.[0-9] MiB/s  [ 0-9]{8}\.[0-9] MiB/s$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i, lines[i], re)
		}
	}

	out, err = exec.Command(luksd, "benchmark", "--hash", "sha256").CombinedOutput()
	if err != nil {
		t.Fatalf("benchmark --hash: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^PBKDF2-sha256    [ 0-9]{6}[0-9] iterations per second for 256-bit key$`).Match(out) {
		t.Errorf("PBKDF2 line not in cryptsetup's format:\n%s", out)
	}
	if strings.Contains(string(out), "Algorithm") {
		t.Errorf("--hash printed the cipher table:\n%s", out)
	}
}

// TestBenchmarkCipherRows: the default table has cryptsetup 2.6.1's rows in
// its order (src/cryptsetup.c's bciphers, then Adiantum) and luksd runs
// every one of them; serpent and twofish also run alone as --cipher.
func TestBenchmarkCipherRows(t *testing.T) {
	var got []string
	for _, r := range benchCiphers {
		spec := r.cipher + "-" + r.mode + "-" + r.iv
		if _, err := dmcrypt.New(spec, make([]byte, r.keyBits/8)); err != nil {
			t.Errorf("row %s %db: %v", spec, r.keyBits, err)
		}
		got = append(got, fmt.Sprintf("%s-%s %d", r.cipher, r.mode, r.keyBits))
	}
	want := []string{"aes-cbc 128", "serpent-cbc 128", "twofish-cbc 128", "aes-cbc 256", "serpent-cbc 256", "twofish-cbc 256",
		"aes-xts 256", "serpent-xts 256", "twofish-xts 256", "aes-xts 512", "serpent-xts 512", "twofish-xts 512",
		"xchacha12,aes-adiantum 256", "xchacha20,aes-adiantum 256"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
	luksd := testtool.Luksd(t)
	for c, bits := range map[string]string{"serpent-cbc": "128", "twofish-xts": "256"} {
		out, err := exec.Command(luksd, "benchmark", "--cipher", c, "--key-size", bits).CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^`+c+`        `+bits+`b  [ 0-9]{8}\.[0-9] MiB/s  [ 0-9]{8}\.[0-9] MiB/s$`).Match(out) {
			t.Errorf("benchmark --cipher %s: %v\n%s", c, err, out)
		}
	}
}

func TestBenchmarkRefusesBadInput(t *testing.T) {
	luksd := testtool.Luksd(t)
	for _, args := range [][]string{
		{"benchmark", "--sector-size", "1000"},
		{"benchmark", "--cipher", "nonsense"},
		{"benchmark", "--cipher", "blowfish-cbc"},
		{"benchmark", "--key-size", "7", "--cipher", "aes-xts"},
	} {
		cmd := exec.Command(luksd, args...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("%v: err %v, want exit 1\n%s", args, err, out)
		}
		if strings.Contains(string(out), "goroutine ") || strings.Contains(string(out), "panic") {
			t.Errorf("%v: stack trace in output:\n%s", args, out)
		}
	}
}
