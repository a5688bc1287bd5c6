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
//     device is held, HUP reopens the log, USR1 logs every goroutine's
//     stack).
//   - spawn.go: Spawn (background, readiness over a pipe), Exec (systemd's
//     foreground), RunChild (the daemon process they start); the key
//     crosses a pipe, never argv or the environment.
//   - state.go: RunDir (/run/luksd, LUKSD_RUN_DIR), the per-name lock and
//     state file, Active, ResolveName, UserOf.
//   - control.go: the control socket (Close), stale cleanup (CleanStale)
//     and the checks before a start (CheckFree).
//   - log.go: what the daemon logs and where (Log, the log file, SIGHUP,
//     SIGUSR1's stacks).
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
// Online jobs: a reencryption of the open volume (reencrypt_online.go:
// the control command and the job's hooks into the crypt layer;
// reencrypt_job.go: one job at a time, its progress in the state file,
// paused when the daemon closes; reencrypt_client.go: the CLI's side).
// The job's steps are cmd/luksd's (it sets Reencrypter, next to luks2),
// so the daemon still imports no luks2; the keys cross the control
// socket after the command line, never in it.
package daemon
