package dmcrypt

import (
	"errors"
	"fmt"
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Online reencryption (a LUKS2 reencryption while the volume is in use):
// the Device maps its data area as two segments, the new cipher before a
// boundary and the old one from it on, as dm-crypt's table of crypt
// targets does between two steps. The job rewrites one hotzone at a time
// right after the boundary: Hold keeps requests out of it (new ones wait,
// those under way finish first), the job reads, rewrites and writes the
// ciphertext below the crypt layer and commits its metadata, then Advance
// moves the boundary past the hotzone and lets the waiting requests in.
// So a request never sees a sector half-way between the ciphers, and
// requests elsewhere flow on. Both segments span the whole data area with
// IVs counted from its start, which is what a segment at offset X with
// iv_tweak X/512 gives.

// ErrHotzoneFailed is a request into a hotzone whose rewrite failed: its
// sectors may hold either cipher, so they are not served.
var ErrHotzoneFailed = errors.New("reencryption hotzone failed; its data is not served until the reencryption is resumed")

// Reencryption is the online reencryption of a Device (BeginReencryption).
type Reencryption struct {
	d        *Device
	mu       sync.Mutex
	cond     *sync.Cond
	boundary int64   // plaintext before it is in the new cipher
	hot      span    // held hotzone; empty when none
	failed   span    // a hotzone whose rewrite failed
	inflight []*span // requests under way
	old, new *Device
}

// span is the plaintext range [lo, hi).
type span struct{ lo, hi int64 }

func (s span) overlaps(o span) bool { return s.lo < o.hi && o.lo < s.hi }

// ReencryptSegment is one side of an online reencryption: its cipher
// (owned by the Device from BeginReencryption on) and sector size.
type ReencryptSegment struct {
	Cipher     SectorCipher
	SectorSize int
}

// BeginReencryption maps d's data area as new before done (bytes of
// plaintext) and old from it on, replacing what mapped it so far; it
// waits for the requests under way. A reencryption that ended before
// (all of the data in its new cipher) makes way for the new one. The
// Device owns both ciphers, also when it fails.
func (d *Device) BeginReencryption(old, new ReencryptSegment, done int64) (*Reencryption, error) {
	d.suspendMu.Lock()
	defer d.suspendMu.Unlock()
	wipe := func() { old.Cipher.Wipe(); new.Cipher.Wipe() }
	size := d.size.Load()
	switch {
	case d.gate.shut.Load():
		wipe()
		return nil, ErrSuspended
	case d.online.Load() != nil && d.online.Load().Done() < size:
		wipe()
		return nil, errors.New("a reencryption is already running")
	case done < 0 || done > size:
		wipe()
		return nil, fmt.Errorf("reencryption offset %d is outside the %d-byte volume", done, size)
	}
	r := &Reencryption{d: d, boundary: done}
	r.cond = sync.NewCond(&r.mu)
	var err error
	for _, side := range []struct {
		dev **Device
		s   ReencryptSegment
	}{{&r.old, old}, {&r.new, new}} {
		*side.dev, err = NewDevice(d.backend, side.s.Cipher, DeviceOptions{Offset: d.offset, Size: size,
			SectorSize: side.s.SectorSize, AllowDiscards: d.discards.Load(), ReadOnly: d.readOnly})
		if err != nil {
			wipe()
			return nil, err
		}
	}
	d.gate.close()
	previous := d.parts
	d.parts = []part{{start: 0, dev: r.new}, {start: 0, dev: r.old}}
	d.online.Store(r)
	d.gate.open()
	for _, p := range previous {
		p.dev.closed.Store(true)
		p.dev.cipher.Wipe()
	}
	return r, nil
}

// End makes the new segment of a finished reencryption (all of the data
// in the new cipher) the Device's one segment: its cipher and sector
// size, no parts, so the Device suspends and resumes (with the new key)
// as one that was opened so. It waits for the requests under way.
func (r *Reencryption) End() error {
	d := r.d
	d.suspendMu.Lock()
	defer d.suspendMu.Unlock()
	switch {
	case d.online.Load() != r:
		return errors.New("the reencryption no longer maps the device")
	case r.Done() < d.size.Load():
		return errors.New("the reencryption has not finished")
	case d.gate.shut.Load():
		return ErrSuspended
	}
	d.gate.close()
	previous := d.cipher
	d.cipher, d.sectorSize, d.ivOffset = r.new.cipher, r.new.sectorSize, r.new.ivOffset
	d.parts = nil
	d.online.Store(nil)
	d.gate.open()
	r.new.closed.Store(true) // its cipher is the Device's now
	r.old.closed.Store(true)
	r.old.cipher.Wipe()
	if previous != nil {
		previous.Wipe()
	}
	return nil
}

// Done is the boundary: the bytes of plaintext in the new cipher.
func (r *Reencryption) Done() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.boundary
}

// Backend is the ciphertext device the job reads and writes hotzones on.
func (r *Reencryption) Backend() blockdev.Device { return r.d.backend }

// Hold keeps requests out of the hotzone [off, off+length): later ones
// wait, and Hold returns once those under way there have finished.
func (r *Reencryption) Hold(off, length int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hot = span{off, off + length}
	for r.busy(r.hot) {
		r.cond.Wait()
	}
}

// Advance moves the boundary to boundary (the held hotzone is in the new
// cipher on disk and in the metadata) and lets the waiting requests in.
func (r *Reencryption) Advance(boundary int64) {
	r.mu.Lock()
	r.boundary = boundary
	r.hot = span{}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// Abandon releases the held hotzone after its rewrite failed: requests
// into it fail (ErrHotzoneFailed) from now on.
func (r *Reencryption) Abandon() {
	r.mu.Lock()
	r.failed, r.hot = r.hot, span{}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// busy reports whether a request under way overlaps s (r.mu held).
func (r *Reencryption) busy(s span) bool {
	for _, q := range r.inflight {
		if q.overlaps(s) {
			return true
		}
	}
	return false
}

// enter waits until s is outside the held hotzone and counts it in.
func (r *Reencryption) enter(s *span) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s.overlaps(r.hot) {
		r.cond.Wait()
	}
	if s.overlaps(r.failed) {
		return ErrHotzoneFailed
	}
	r.inflight = append(r.inflight, s)
	return nil
}

// leave counts s out, waking a Hold that waits for it.
func (r *Reencryption) leave(s *span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, q := range r.inflight {
		if q == s {
			last := len(r.inflight) - 1
			r.inflight[i], r.inflight[last] = r.inflight[last], nil
			r.inflight = r.inflight[:last]
			break
		}
	}
	if s.overlaps(r.hot) {
		r.cond.Broadcast()
	}
}

// eachPart is Device.eachPart during an online reencryption: the part of
// [off, off+length) before the boundary goes to the new segment, the rest
// to the old one, while no hotzone it touches is held.
func (r *Reencryption) eachPart(off, length int64, fn func(sub *Device, subOff int64, lo, hi int64) error) error {
	s := &span{off, off + length}
	if err := r.enter(s); err != nil {
		return err
	}
	defer r.leave(s)
	r.mu.Lock()
	b := r.boundary
	r.mu.Unlock()
	if off < b {
		if err := fn(r.new, off, 0, min(length, b-off)); err != nil {
			return err
		}
	}
	if off+length > b {
		at := max(off, b)
		return fn(r.old, at, at-off, length)
	}
	return nil
}
