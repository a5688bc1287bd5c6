package luks2

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// pbkdf2CPUTime runs derive on one OS thread and returns the CPU time it
// took there. cryptsetup calibrates PBKDF2 by the process's user CPU time
// (getrusage), not wall time, so a busy machine does not talk it into fewer
// iterations; the thread's own time is the same measure without the Go
// runtime's other threads (the collector) in it. Where the kernel reports
// no user time at all (seen under some hypervisors) system time counts too,
// as in cryptsetup.
func pbkdf2CPUTime(derive func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var start, end unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &start) != nil {
		return wallTime(derive)
	}
	derive()
	if unix.Getrusage(unix.RUSAGE_THREAD, &end) != nil {
		return wallTime(derive)
	}
	d := tvDuration(end.Utime) - tvDuration(start.Utime)
	if tvDuration(start.Utime) == 0 && tvDuration(end.Utime) == 0 {
		d += tvDuration(end.Stime) - tvDuration(start.Stime)
	}
	return d
}

// argon2CPUTime runs derive, which fills lanes lanes in parallel, and
// returns the process's CPU time (user and system: the page faults of
// fresh memory are part of a derivation) divided by the lanes that ran at
// once: on an idle machine, the wall time. cryptsetup times argon2 by the
// wall clock, so a busy machine talks it into a cheaper keyslot, and its
// samples swing with the load (on a shared 2-core machine, 65-140 MiB
// from one luksFormat to the next); by CPU time luksd's keyslots keep
// their cost, and calibration's estimates hold from one run to the next.
func argon2CPUTime(derive func(), lanes int) time.Duration {
	var start, end unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &start) != nil {
		return wallTime(derive)
	}
	derive()
	if unix.Getrusage(unix.RUSAGE_SELF, &end) != nil {
		return wallTime(derive)
	}
	cpu := tvDuration(end.Utime) - tvDuration(start.Utime) + tvDuration(end.Stime) - tvDuration(start.Stime)
	return cpu / time.Duration(max(1, min(lanes, runtime.GOMAXPROCS(0))))
}

func wallTime(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func tvDuration(tv unix.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}
