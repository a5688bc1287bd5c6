package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file to write a CPU profile of this process to, for
// finding where a server's time goes (`LUKSD_CPUPROFILE=/tmp/serve.pprof
// luksd serve ...`, then `go tool pprof bin/luksd /tmp/serve.pprof`). A
// debugging aid: unset, nothing is profiled. The profile is complete when
// the verb returns (serve: after SIGINT or SIGTERM).
const cpuProfileEnv = "LUKSD_CPUPROFILE"

// startProfile starts the CPU profile cpuProfileEnv asks for and returns
// what stops it; a profile that cannot start is one line on stderr and
// the command runs on.
func startProfile() (stop func()) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
