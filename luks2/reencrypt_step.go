package luks2

import "fmt"

// Online reencryption: a daemon serving the volume runs the steps itself,
// with both volume keys the CLI opened (ReencryptWithKeys), reading and
// writing each hotzone's ciphertext under its crypt layer while it keeps
// requests out of the hotzone (ReencryptRun.Hold). The metadata each step
// writes is the offline run's, which is what cryptsetup 2.6.1's online
// reencryption writes too: a daemon killed at any point leaves a header
// that either tool resumes.

// ReencryptLayout is where a reencryption stands: the old and new
// segments over the data and the bytes already in the new cipher.
type ReencryptLayout struct {
	Old, New    Segment // Offset is the data offset; Size 0 = to the end of the device
	Done, Total int64   // bytes of data in the new cipher; bytes of data
	Hot         bool    // a crash left a hotzone to recover (OpenReencrypting does)
}

// ReencryptLayout reads where the reencryption of the volume (devSize
// bytes of header and data) stands.
func (h *Header) ReencryptLayout(devSize int64) (*ReencryptLayout, error) {
	v2, ok := h.v2()
	if !ok || !h.InReencryption() {
		return nil, ErrNotInReencryption
	}
	st, err := v2.reencryptState()
	if err != nil {
		return nil, err
	}
	if st.mode != "reencrypt" {
		return nil, fmt.Errorf("%w: online %s", ErrReencryptUnsupported, st.mode)
	}
	total, err := st.dataSize(devSize)
	if err != nil {
		return nil, err
	}
	seg := func(s *segment) Segment {
		return Segment{Offset: int64(st.dataOffset), Size: int64(s.size), Cipher: s.cipher, SectorSize: s.sectorSize}
	}
	return &ReencryptLayout{Old: seg(st.oldSeg), New: seg(st.newSeg), Done: int64(min(st.done, total)),
		Total: int64(total), Hot: st.hot != nil}, nil
}

// ReencryptWithKeys is Reencrypt with the old and new volume keys already
// opened: it checks them against the reencryption digest, recovers an
// interrupted hotzone, and runs the steps.
func (h *Header) ReencryptWithKeys(dev Device, devSize int64, oldVK, newVK []byte, r ReencryptRun) error {
	v2, ok := h.v2()
	if !ok || !h.InReencryption() {
		return ErrNotInReencryption
	}
	if r.Data == nil || r.Commit == nil {
		return fmt.Errorf("online reencryption needs a data device and a commit")
	}
	j, err := v2.newReencryptJob(dev, devSize, r)
	if err != nil {
		return err
	}
	return j.runWithKeys(oldVK, newVK)
}

// hold calls run.Hold for the step's hotzone and returns what ends it:
// ok moves the boundary to the bytes done, else the hotzone is abandoned.
func (j *reencryptJob) hold(off, length uint64) func(ok bool) {
	if j.run.Hold == nil {
		return func(bool) {}
	}
	release := j.run.Hold(int64(off), int64(length))
	return func(ok bool) {
		if ok {
			release(int64(j.st.done))
		} else {
			release(-1)
		}
	}
}
