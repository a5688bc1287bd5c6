package daemon

import (
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
)

// An NBD export's requests cost microseconds of CPU each, and its clients
// (fio, qemu, the kernel's NBD driver and the file system above it) run
// on the same machine's CPUs. Every request hands work from one goroutine
// to another, and while the Go scheduler has an idle P it wakes a thread
// to spin on that P looking for the work: on a machine whose other CPUs
// the clients need, those spinning threads take CPU from them. Measured
// with contrib/bench/nbd.sh on 2 CPUs, serving with GOMAXPROCS=1 instead
// of 2 cut luksd's CPU time per request by a fifth to a third (4 KiB
// random reads 15.1 to 11.7 us, random writes 16.8 to 10.8 us, 1 MiB
// writes 358 to 261 us) and raised IOPS by up to 40%; 1 MiB reads, whose
// decryption would run on both CPUs, moved within noise (0.94x to 1.07x).
// So an export of a local file or block device leaves one CPU to its
// clients, unless GOMAXPROCS says otherwise or the runtime has fewer than
// every CPU already (a cgroup limit). Not when its cipher is slow: then a
// large request's decryption is the work, and it runs on every CPU
// (parallel.go in dmcrypt): tried in the VM suite (TCG, aes-xts at 70
// MiB/s a vCPU), GOMAXPROCS=1 took `open`'s 1 MiB reads through /dev/nbdN
// and /dev/ublkbN from 0.41 and 0.49x of dm-crypt to 0.31 and 0.33x while
// its 4 KiB shapes gained. So a CPU is left only where one decrypts at
// least fastCipherMiBs, and only by `serve` (`open` is measured in the VM
// alone, where no cipher is fast). An export of a remote volume keeps
// every CPU: it also speaks the store's protocol, and in front of nbdkit
// (contrib/bench/nbd_front.sh, same run) one CPU fewer cost it 5-20%. An
// online reencryption, whose CPU work is its own, takes every CPU while
// it runs.

// fastCipherMiBs is the one-CPU decryption speed (MiB/s, in the volume's
// sectors) from which its cipher costs less per 1 MiB request than
// the CPU an idle P's spinning takes. Here (2 CPUs with VAES) aes-xts
// decrypts over 20 GiB/s on one CPU (TestFastCipher logs it) and 1 MiB
// reads lost 5% without the second CPU; the VM suite's TCG vCPUs manage
// 70 MiB/s.
const fastCipherMiBs = 2048

// serveProcs sets GOMAXPROCS for serving spec's volume (before the crypt
// layer sizes its parallelism by it).
func serveProcs(spec Spec) {
	if blockdev.Scheme(spec.Location) != "" || !fastCipher(spec.Segment) {
		return
	}
	if leaveOneCPU() {
		Log.Printf("using %d of %d CPUs, one left to the clients (GOMAXPROCS in the environment overrides)",
			runtime.GOMAXPROCS(0), runtime.NumCPU())
	}
}

// fastCipher reports whether seg's cipher decrypts at least
// fastCipherMiBs on one CPU, measured for a few milliseconds.
func fastCipher(seg Segment) bool {
	if seg.Cipher == LinearSegment {
		return true
	}
	ss := seg.SectorSize
	if ss == 0 {
		ss = 512
	}
	_, dec, err := dmcrypt.Speed(seg.Cipher, seg.KeySize, ss, 256<<10, 5*time.Millisecond)
	return err == nil && dec >= fastCipherMiBs
}

var procs struct {
	sync.Mutex
	lowered bool // leaveOneCPU lowered GOMAXPROCS
	raised  int  // CPU-bound jobs running with every CPU
}

// leaveOneCPU lowers GOMAXPROCS by one for serving, as explained above,
// and reports whether it did.
func leaveOneCPU() bool {
	if os.Getenv("GOMAXPROCS") != "" {
		return false
	}
	procs.Lock()
	defer procs.Unlock()
	n := runtime.GOMAXPROCS(0)
	if procs.lowered || n < 2 || n < runtime.NumCPU() {
		return false
	}
	runtime.GOMAXPROCS(n - 1)
	procs.lowered = true
	return true
}

// allCPUs gives every CPU to a CPU-bound job when leaveOneCPU took one
// away; the function it returns gives it back when the last such job
// ends.
func allCPUs() (done func()) {
	procs.Lock()
	defer procs.Unlock()
	if !procs.lowered {
		return func() {}
	}
	if procs.raised == 0 {
		runtime.GOMAXPROCS(runtime.NumCPU())
	}
	procs.raised++
	return func() {
		procs.Lock()
		defer procs.Unlock()
		if procs.raised--; procs.raised == 0 {
			runtime.GOMAXPROCS(runtime.NumCPU() - 1)
		}
	}
}
