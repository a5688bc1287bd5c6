package daemon

import (
	"os"
	"runtime"
	"sync"
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
// every CPU already (a cgroup limit). An export of a remote volume keeps
// them all: it also speaks the store's protocol, and in front of nbdkit
// (contrib/bench/nbd_front.sh, same run) one CPU fewer cost it 5-20%. An
// online reencryption, whose CPU work is its own, takes every CPU while
// it runs.

var procs struct {
	sync.Mutex
	lowered bool // leaveOneCPU lowered GOMAXPROCS
	raised  int  // CPU-bound jobs running with every CPU
}

// leaveOneCPU lowers GOMAXPROCS by one for serving, as explained above.
func leaveOneCPU() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	procs.Lock()
	defer procs.Unlock()
	n := runtime.GOMAXPROCS(0)
	if procs.lowered || n < 2 || n < runtime.NumCPU() {
		return
	}
	runtime.GOMAXPROCS(n - 1)
	procs.lowered = true
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
