package daemon

import (
	"runtime"
	"testing"
	"time"

	"github.com/luksd/luksd/dmcrypt"
)

// resetProcs undoes leaveOneCPU after a test.
func resetProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(prev)
		procs.Lock()
		procs.lowered, procs.raised = false, 0
		procs.Unlock()
	})
}

func TestLeaveOneCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to leave (needs a machine with two or more)")
	}
	resetProcs(t)
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(runtime.NumCPU())
	n := runtime.NumCPU()

	leaveOneCPU()
	leaveOneCPU() // once only
	if got := runtime.GOMAXPROCS(0); got != n-1 {
		t.Fatalf("GOMAXPROCS after leaveOneCPU = %d, want %d", got, n-1)
	}
	done1 := allCPUs()
	done2 := allCPUs()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS during a job = %d, want every CPU (%d)", got, n)
	}
	done1()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS with one job still running = %d, want %d", got, n)
	}
	done2()
	if got := runtime.GOMAXPROCS(0); got != n-1 {
		t.Fatalf("GOMAXPROCS after the jobs = %d, want %d", got, n-1)
	}
}

func TestLeaveOneCPUKeepsAChosenLimit(t *testing.T) {
	resetProcs(t)
	t.Setenv("GOMAXPROCS", "7")
	runtime.GOMAXPROCS(7)
	leaveOneCPU()
	if got := runtime.GOMAXPROCS(0); got != 7 {
		t.Fatalf("GOMAXPROCS=7 in the environment, after leaveOneCPU = %d", got)
	}
	allCPUs()() // no-op: nothing was lowered
	if got := runtime.GOMAXPROCS(0); got != 7 {
		t.Fatalf("GOMAXPROCS=7 in the environment, after a job = %d", got)
	}

	// A cgroup limit below the machine's CPUs is kept too.
	t.Setenv("GOMAXPROCS", "")
	if runtime.NumCPU() < 3 {
		return
	}
	runtime.GOMAXPROCS(runtime.NumCPU() - 1)
	leaveOneCPU()
	if got := runtime.GOMAXPROCS(0); got != runtime.NumCPU()-1 {
		t.Fatalf("GOMAXPROCS below the CPU count, after leaveOneCPU = %d", got)
	}
}

func TestFastCipher(t *testing.T) {
	// A cipher spec the crypt layer does not know is never fast: the
	// export keeps every CPU.
	if fastCipher(Segment{Cipher: "nonesuch-xts-plain64", KeySize: 64, SectorSize: 4096}) {
		t.Fatal("an unknown cipher counted as fast")
	}
	if !fastCipher(Segment{Cipher: LinearSegment}) {
		t.Fatal("a linear segment (no cipher) counted as slow")
	}
	_, dec, err := dmcrypt.Speed("aes-xts-plain64", 64, 4096, 256<<10, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("aes-xts-plain64 decrypts at %.0f MiB/s on one CPU here (fast from %d)", dec, fastCipherMiBs)
}
