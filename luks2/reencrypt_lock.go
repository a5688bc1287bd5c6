package luks2

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// cryptsetup 2.6.1 holds a named lock for the whole of a reencryption run
// and while it activates a volume in reencryption (reencrypt_lock_internal:
// a non-blocking exclusive flock on LockDir/LN_LUKS2-reencryption-UUID),
// so that nothing maps a volume whose hotzone is being rewritten. luksd
// takes the same lock, so the tools exclude each other there too.

// ErrReencryptionLocked: another process holds a volume's reencryption
// lock (cryptsetup: "Reencryption in-progress. Cannot activate device."
// on open, "Reencryption process is already running." on reencrypt).
var ErrReencryptionLocked = errors.New("reencryption lock is held by another process")

// LockReencryption takes the reencryption lock of the volume uuid without
// waiting: ErrReencryptionLocked when it is taken.
func LockReencryption(uuid string) (*Lock, error) {
	if len(uuid) == 0 {
		return nil, fmt.Errorf("%w: no UUID", ErrLocking)
	}
	res := "LN_LUKS2-reencryption-" + uuid
	for {
		f, err := openLockFile(res)
		if err != nil {
			return nil, err
		}
		l := &Lock{f: f, res: f.Name()}
		if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, ErrReencryptionLocked
			}
			return nil, fmt.Errorf("%w: flock %s: %v", ErrLocking, f.Name(), err)
		}
		// The last holder may have removed the file between our open and
		// our flock: then lock the new one.
		if l.verified() {
			return l, nil
		}
		f.Close()
	}
}
