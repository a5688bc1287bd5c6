package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// Opening (open, serve) a volume in the middle of a reencryption, as
// cryptsetup 2.6.1 activates one: under the exclusive metadata lock, a
// hotzone a crash left is recovered first, then both volume keys are
// opened and the daemon maps the data segments, each with its own cipher
// and key (luks2.OpenReencrypting; daemon.Spec.Segments).

// unlockReencrypting asks for the passphrase (--tries on a terminal when
// retry) and opens the volume in reencryption on path.
func unlockReencrypting(c *cli.Context, path string, slot int, retry bool) (*volume, error) {
	hp := headerPath(c, path)
	hw, err := openHeaderDevice(c, hp, true)
	if err != nil {
		return nil, err
	}
	defer hw.Close()
	h, err := hw.read()
	if err != nil {
		return nil, headerError(hp, err)
	}
	// The data: the header's device, or the device after --header.
	var data luks2.Device = hw
	dataSize := hw.Size
	if hp != path {
		f, size, err := openDevice(path, true)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data, dataSize = syncedFile{f}, size
	}
	lock, err := lockReencryption(hw, h.UUID(), "Reencryption in-progress. Cannot activate device.")
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	var m *luks2.ReencryptMapping
	open := func(pass []byte) error {
		return hw.edit(func() error {
			var err error
			if h, err = hw.read(); err != nil {
				return err
			}
			m, err = h.OpenReencryptingDetached(hw, data, dataSize, pass, slot, nil)
			return err
		})
	}
	if err := unlockReencryptingByToken(c, h, hw, retry, open); err != nil {
		return nil, err
	}
	if m == nil {
		if err := unlockReencryptingByPassphrase(c, path, retry, open); err != nil {
			return nil, err
		}
	}
	defer m.Wipe()
	key, err := keyring.NewSecret(len(m.OldKey) + len(m.NewKey))
	if err != nil {
		return nil, withCode(exitMemory, err)
	}
	copy(key.Bytes()[copy(key.Bytes(), m.OldKey):], m.NewKey)
	verbosef(c, "Key slot %d unlocked.", m.Slot)
	v := &volume{Path: path, HeaderPath: hp, Header: h, Segment: m.Final, Key: key, Slot: m.Slot}
	if len(m.Segments) > 1 || m.OldKey != nil {
		v.Reencrypting = m.Segments
		v.oldKeySize = len(m.OldKey)
	}
	return v, nil
}

// unlockReencryptingByToken tries the tokens as open does before it asks
// for a passphrase: the passphrase a token holds opens both volume keys
// (open). It returns with nothing opened when the passphrase is next.
func unlockReencryptingByToken(c *cli.Context, h *luks2.Header, hw *headerDevice, retry bool, open func([]byte) error) error {
	if !retry && !tokensAsked(c) {
		return nil
	}
	opened := false
	key, _, err := unlockByTokenWith(c, h, hw, retry, func(_ luks2.TokenAttempt, pass []byte) ([]byte, int, error) {
		if err := open(pass); err != nil {
			return nil, -1, err
		}
		opened = true
		return []byte{0}, 0, nil // the keys are in open's mapping
	})
	if key != nil {
		key.Wipe()
	}
	if err != nil && !opened {
		return err
	}
	return nil
}

// unlockReencryptingByPassphrase asks for the passphrase (--tries on a
// terminal when retry) until it opens both volume keys (open).
func unlockReencryptingByPassphrase(c *cli.Context, path string, retry bool, open func([]byte) error) error {
	src := keySource(c)
	tries := 1
	if retry && src.Interactive() && c.Int("tries") > 1 {
		tries = c.Int("tries")
	}
	for try := 1; ; try++ {
		pass, err := readPassphrase(src, fmt.Sprintf("Enter passphrase for %s: ", path), false)
		if err != nil {
			return err
		}
		err = open(pass.Bytes())
		pass.Wipe()
		if err == nil {
			return nil
		}
		if !errors.Is(err, luks2.ErrWrongPassphrase) || try >= tries {
			return reencryptError(path, err)
		}
		fmt.Fprintln(os.Stderr, "No key available with this passphrase.")
	}
}

// syncedFile is a data device file whose Flush is fsync.
type syncedFile struct{ luks2.File }

func (f syncedFile) Flush() error { return f.Sync() }

// reencryptSegments are v's data segments for the daemon: the old key
// first in v.Key, then the new one.
func (v *volume) reencryptSegments() []daemon.Segment {
	var segs []daemon.Segment
	for _, s := range v.Reencrypting {
		if s.Linear {
			segs = append(segs, daemon.Segment{Cipher: daemon.LinearSegment, Offset: s.Offset, Size: s.Size, SectorSize: 512})
			continue
		}
		seg := daemon.Segment{Cipher: s.Cipher, Offset: s.Offset, Size: s.Size,
			SectorSize: s.SectorSize, KeySize: s.KeySize, IVOffset: s.IVTweak}
		if s.New {
			seg.KeyOffset = v.oldKeySize
		}
		segs = append(segs, seg)
	}
	return segs
}

// reencryptError maps a reencryption failure on path's header to
// cryptsetup's message and exit code.
func reencryptError(path string, err error) error {
	switch {
	case errors.Is(err, luks2.ErrWrongPassphrase):
		return exitf(exitPermission, "No key available with this passphrase.")
	case errors.Is(err, luks2.ErrReencryptInvalid):
		return exitf(exitParams, "Reencryption metadata is invalid.")
	case errors.Is(err, luks2.ErrReencryptUnsupported):
		return exitf(exitParams, "%v", err)
	}
	return headerError(path, err)
}

// reencryptRunError is reencryptError for a reencrypt or repair run:
// metadata whose reencryption digest does not verify exits with 2, as
// cryptsetup 2.6.1's do.
func reencryptRunError(path string, err error) error {
	if errors.Is(err, luks2.ErrReencryptDigest) {
		return exitf(exitPermission, "Reencryption metadata is invalid.")
	}
	return reencryptError(path, err)
}

// lockReencryption takes cryptsetup's reencryption lock of the volume
// of header device f (none with --disable-locks, as the metadata locks);
// busy is cryptsetup's words for a lock another process holds. The
// caller releases it with Unlock.
func lockReencryption(f *headerDevice, uuid, busy string) (*luks2.Lock, error) {
	if f.NoLocks {
		return nil, nil
	}
	l, err := luks2.LockReencryption(uuid)
	if errors.Is(err, luks2.ErrReencryptionLocked) {
		return nil, exitf(exitBusy, "%s", busy)
	}
	if err != nil {
		return nil, exitf(exitParams, "Failed to get reencryption lock.")
	}
	return l, nil
}
