// Package daemon is luksd's volume daemon as a library: it runs one
// unlocked volume, the crypt layer over a data device exposed as a kernel
// block device, and knows everything about its life. The CLI reads and
// unlocks the LUKS header, fills in a Spec and hands it over with the
// volume key; the daemon never parses a header and never imports luks2.
//
//   - spec.go: the Spec a volume runs from (segment, location, options).
//   - run.go: Run, the daemon itself: claim the name, open the data device
//     (device.go: blockdev.Open, claimed, and dmcrypt over it), attach the
//     frontend (package frontend), serve until close, a stop signal or the
//     kernel device's end; signals (TERM, INT and QUIT wait while the
//     device is held, HUP reopens the log).
//   - spawn.go: Spawn (background, readiness over a pipe), Exec (systemd's
//     foreground), RunChild (the daemon process they start); the key
//     crosses a pipe, never argv or the environment.
//   - state.go: RunDir (/run/luksd, LUKSD_RUN_DIR), the per-name lock and
//     state file, Active, ResolveName, UserOf.
//   - control.go: the control socket (Close), stale cleanup (CleanStale)
//     and the checks before a start (CheckFree).
//   - log.go: what the daemon logs and where (Log, the log file, SIGHUP).
//   - memory.go: memory locking and PR_SET_IO_FLUSHER; oom.go:
//     oom_score_adj -1000.
//   - mapper.go: the volume's /dev/mapper/NAME (a device-mapper linear
//     mapping, dmioctl.go, or a symlink); udev.go: the change event for
//     luksd's udev rules, VolumeOnDevice.
//   - serve.go: Serve, the volume as an NBD export on a socket.
//   - errors.go: the kinds of failure the CLI maps to exit codes.
//
// Where things plug in: a backend (s3://, nbd://) is a blockdev package
// registered with blockdev.Register; a frontend is a file in package
// frontend; what the daemon logs is log.go and the Log.Printf calls.
//
// Online jobs (reencryption while the volume is open) are not here yet,
// and deliberately so: a job interface with no job would be code nobody
// runs. They plug in thus. A job is a value behind a small interface
// (Start(dev blockdev.Device) error, Progress() string, Stop() error),
// implemented next to luks2 because it writes header checkpoints; the
// daemon runs it over the crypt layer it serves, which then has two
// segments. The CLI unlocks both keys and builds the job; since the job's
// code lives in the daemon process (the same binary), the CLI sends its
// kind, its spec and its keys over a new control command ("job start",
// beside "close" in acceptControl, the keys passed as a file descriptor,
// never in the line), and cmd/luksd registers a constructor for each
// kind with the daemon at start, so the daemon still imports no luks2.
// "job status" answers Progress on the same socket.
package daemon
