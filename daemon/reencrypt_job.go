package daemon

import (
	"errors"
	"fmt"
)

// The life of a daemon's online reencryption job: one at a time, its
// progress in the state file (status), paused when the daemon closes.

// errNoReencrypter: a daemon built without the CLI's reencryption engine.
var errNoReencrypter = errors.New("this daemon cannot reencrypt online")

// run runs job to its end, a pause or a failure, sending progress lines
// to report while the requester listens.
func (o *onlineJob) run(job *ReencryptJob, report func(line string)) error {
	defer job.secret.Wipe()
	if Reencrypter == nil {
		return errNoReencrypter
	}
	o.mu.Lock()
	switch {
	case o.running != nil:
		o.mu.Unlock()
		return errorf(ErrBusy, "Reencryption process is already running.")
	case o.stopping.Load():
		o.mu.Unlock()
		return errorf(ErrBusy, "The daemon is closing.")
	case o.spec.Options.ReadOnly:
		o.mu.Unlock()
		return errorf(ErrInvalid, "Volume %s is open read-only: the daemon cannot rewrite it.", o.spec.Name)
	case o.keys.suspended():
		o.mu.Unlock()
		return errorf(ErrInvalid, "Volume %s is suspended.", o.spec.Name)
	}
	if err := o.checkKeys(job); err != nil {
		o.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	o.running, o.report = done, report
	o.mu.Unlock()
	o.saveState(func(st *State) { st.Reencryption, st.ReencryptRunning = "in-progress", true })
	Log.Printf("%s: online reencryption started", o.spec.Name)
	restore := allCPUs()
	err := Reencrypter(job)
	restore()
	o.mu.Lock()
	o.running, o.report = nil, nil
	close(done)
	o.mu.Unlock()
	o.finished(job, err)
	return err
}

// finished records how the job ended.
func (o *onlineJob) finished(job *ReencryptJob, err error) {
	name := o.spec.Name
	switch {
	case err != nil:
		Log.Printf("%s: online reencryption stopped: %s", name, oneLine(err))
		o.saveState(func(st *State) { st.ReencryptRunning = false })
	case job.reen != nil && job.reen.Done() >= o.dev.Size():
		Log.Printf("%s: online reencryption finished", name)
		f := o.final
		// The volume is one segment again, in the new key: luksSuspend
		// and luksResume work as after an open.
		if err := job.reen.End(); err != nil {
			Log.Printf("%s: %s", name, oneLine(err))
		} else if o.keys != nil {
			o.keys.rekey(f, job.NewKey)
		}
		o.saveState(func(st *State) {
			st.Reencryption, st.ReencryptRunning, st.ReencryptDone, st.ReencryptTotal = "", false, 0, 0
			st.Cipher, st.KeySize, st.SectorSize = f.Cipher, len(job.NewKey), f.SectorSize
		})
	default:
		Log.Printf("%s: online reencryption paused", name)
		o.saveState(func(st *State) { st.ReencryptRunning = false })
	}
}

// progress records the bytes done and tells the requester, if it listens.
func (o *onlineJob) progress(done, total int64) {
	o.saveState(func(st *State) { st.ReencryptDone, st.ReencryptTotal = done, total })
	o.mu.Lock()
	report := o.report
	o.mu.Unlock()
	if report != nil {
		report(fmt.Sprintf("progress %d %d", done, total))
	}
}

// saveState changes the state and writes it, under the lock that guards it.
func (o *onlineJob) saveState(change func(st *State)) {
	if o.st == nil {
		return
	}
	if o.keys != nil {
		o.keys.mu.Lock()
		defer o.keys.mu.Unlock()
	}
	change(o.st)
	if err := writeState(o.st); err != nil {
		Log.Printf("%s: %s", o.spec.Name, oneLine(err))
	}
}

// pause stops the job after the step it is in and waits for it: the
// daemon is closing.
func (o *onlineJob) pause() {
	if o == nil {
		return
	}
	o.stopping.Store(true)
	o.mu.Lock()
	done := o.running
	o.mu.Unlock()
	if done != nil {
		Log.Printf("%s: pausing the online reencryption", o.spec.Name)
		<-done
	}
}

// checkKeys refuses keys that are not what the volume was opened with
// (the old key; both, for a volume opened in reencryption): the header
// changed under the daemon. After a job of its own the daemon maps other
// keys, and the header's digests alone vouch for them.
func (o *onlineJob) checkKeys(job *ReencryptJob) error {
	if o.keys == nil || o.reen != nil {
		return nil
	}
	opened := job.OldKey
	if o.spec.reencrypting() {
		opened = job.secret.Bytes()
	}
	if o.keys.matches(opened) != nil {
		return errorf(ErrInvalid, "The header's volume key is not the one %s was opened with.", o.spec.Name)
	}
	return nil
}
