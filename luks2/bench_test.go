package luks2

import (
	"os"
	"strconv"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// BenchmarkUnlockArgon2id times Header.Unlock of one argon2id keyslot.
// contrib/bench/argon2.sh points it at an image cryptsetup made
// (LUKSD_BENCH_IMAGE, LUKSD_BENCH_KEYFILE) to compare with cryptsetup's
// own unlock; without them it formats an in-memory volume with
// LUKSD_BENCH_MEMORY_KIB (default 65536), 4 threads, time cost 4.
func BenchmarkUnlockArgon2id(b *testing.B) {
	var dev interface {
		ReadAt([]byte, int64) (int, error)
	}
	var pass []byte
	var h *Header
	if img := os.Getenv("LUKSD_BENCH_IMAGE"); img != "" {
		f, err := os.Open(img)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if pass, err = os.ReadFile(os.Getenv("LUKSD_BENCH_KEYFILE")); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		if h, err = Read(f, st.Size()); err != nil {
			b.Fatal(err)
		}
		dev = f
	} else {
		mem := 65536
		if s := os.Getenv("LUKSD_BENCH_MEMORY_KIB"); s != "" {
			mem, _ = strconv.Atoi(s)
		}
		m := devtest.NewGrowing()
		pass = []byte("bench")
		var err error
		if h, _, err = Format(m, 0, FormatOptions{DetachedData: true, PBKDF: PBKDF{Type: "argon2id", Iterations: 4, MemoryKiB: mem, Parallel: 4}}, pass); err != nil {
			b.Fatal(err)
		}
		dev = m
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := h.Unlock(dev, pass, -1); err != nil {
			b.Fatal(err)
		}
	}
}
