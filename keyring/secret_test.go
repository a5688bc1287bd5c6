package keyring

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/internal/testtool"
)

func TestSecretFromBytesWipesSource(t *testing.T) {
	src := []byte("correct horse battery staple")
	want := append([]byte(nil), src...)
	s, err := FromBytes(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Wipe()
	if !bytes.Equal(s.Bytes(), want) {
		t.Fatalf("Bytes() = %q, want %q", s.Bytes(), want)
	}
	if !bytes.Equal(src, make([]byte, len(src))) {
		t.Fatalf("source not zeroed: %q", src)
	}
	if s.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", s.Len(), len(want))
	}
}

func TestSecretLockedAndWipe(t *testing.T) {
	s, err := NewSecret(64)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Locked() {
		t.Log("memory not locked (RLIMIT_MEMLOCK too small?)")
	}
	b := s.Bytes()
	if len(b) != 64 || !bytes.Equal(b, make([]byte, 64)) {
		t.Fatalf("new secret not 64 zero bytes: %x", b)
	}
	copy(b, "key")
	s.Wipe()
	if s.Bytes() != nil || s.Len() != 0 || s.Locked() {
		t.Fatal("secret still readable after Wipe")
	}
	s.Wipe() // twice is fine
	var nilSecret *Secret
	nilSecret.Wipe()
}

func TestSecretZeroLengthAndEqual(t *testing.T) {
	a, err := NewSecret(0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Wipe()
	if len(a.Bytes()) != 0 {
		t.Fatalf("zero secret has %d bytes", len(a.Bytes()))
	}
	b, _ := FromBytes([]byte("x"))
	c, _ := FromBytes([]byte("x"))
	d, _ := FromBytes([]byte("y"))
	defer b.Wipe()
	defer c.Wipe()
	defer d.Wipe()
	if !b.Equal(c) || b.Equal(d) || a.Equal(b) {
		t.Fatal("Equal is wrong")
	}
	if _, err := NewSecret(-1); err == nil {
		t.Fatal("negative size accepted")
	}
}

func TestSecretGrowKeepsBytes(t *testing.T) {
	s, _ := FromBytes([]byte("abc"))
	g, err := s.grow(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Wipe()
	if s.Bytes() != nil {
		t.Fatal("old secret not wiped after grow")
	}
	if !bytes.HasPrefix(g.Bytes(), []byte("abc")) || g.Len() != 3*4096 {
		t.Fatalf("grow lost data: len %d", g.Len())
	}
}

// vmLocked returns VmLck from /proc/self/status in KiB.
func vmLocked(t *testing.T) int { return int(testtool.ProcStatusKiB(t, "VmLck")) }

func TestSecretIsLockedInMemory(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 1<<20 {
		t.Skipf("SKIP (not a pass): RLIMIT_MEMLOCK is %d bytes", lim.Cur)
	}
	before := vmLocked(t)
	s, err := NewSecret(3 * os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Locked() {
		t.Fatal("secret not locked although RLIMIT_MEMLOCK allows it")
	}
	during := vmLocked(t)
	s.Wipe()
	after := vmLocked(t)
	pageKiB := os.Getpagesize() / 1024
	if during-before < 3*pageKiB || during-after < 3*pageKiB {
		t.Fatalf("VmLck %d -> %d -> %d kB; want +%d kB while the secret lives", before, during, after, 3*pageKiB)
	}
}
