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
// as in cryptsetup. Argon2 runs on several threads and is timed by the wall
// clock, by cryptsetup too.
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

func wallTime(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func tvDuration(tv unix.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}
