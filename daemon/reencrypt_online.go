package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
)

// Online reencryption (luksd reencrypt on an open volume): the CLI marks
// the volume, opens both volume keys and hands them to the daemon on the
// control socket ("reencrypt OLDLEN NEWLEN HOTZONE RESILIENCE HASH", then
// the keys), never in the command line. The daemon runs the job while it
// serves the volume: Reencrypter (set by the CLI's package, next to luks2;
// the daemon never reads a header) steps through the data, and the crypt
// layer keeps requests out of each hotzone while it is rewritten
// (dmcrypt.Reencryption). The connection gets "progress DONE TOTAL" lines,
// then "ok" or "error CODE: ..." (reencrypt_client.go). Closing the daemon
// (close, SIGTERM) or the requester going away pauses the job between two
// steps; the metadata on disk is then a reencryption in progress that
// `luksd reencrypt NAME` (or cryptsetup, once closed) resumes.

// Reencrypter runs job's LUKS2 reencryption steps; the CLI's package sets
// it in the daemon's process. Nil: the daemon cannot reencrypt online.
var Reencrypter func(job *ReencryptJob) error

// ReencryptJob is an online reencryption as the daemon hands it to
// Reencrypter: the volume, the keys and options, and the daemon's side of
// each step.
type ReencryptJob struct {
	Location, UUID   string
	OldKey, NewKey   []byte // the volume keys, in locked memory until the job ends
	HotzoneSize      int64  // 0: the engine's default
	Resilience, Hash string // "": as recorded in the metadata

	o      *onlineJob
	reen   *dmcrypt.Reencryption
	secret *keyring.Secret // holds OldKey and NewKey
	cancel atomic.Bool     // the requester went away
}

// Begin maps the volume for the job: new before done (bytes of data),
// old from there on, each segment keyed with its key. It returns the
// ciphertext device the job reads and writes hotzones on.
func (j *ReencryptJob) Begin(old, new Segment, done int64) (blockdev.Device, error) {
	if r := j.o.reen; r != nil && r.Done() < j.o.dev.Size() {
		// An earlier job of this daemon paused: its mapping stands.
		if r.Done() != done {
			return nil, fmt.Errorf("the volume is mapped reencrypted to %d bytes, the metadata says %d", r.Done(), done)
		}
		j.reen = r
		return r.Backend(), nil
	}
	oc, err := sectorCipher(old, j.OldKey)
	if err != nil {
		return nil, fmt.Errorf("old segment: %w", err)
	}
	nc, err := sectorCipher(new, j.NewKey)
	if err != nil {
		oc.Wipe()
		return nil, fmt.Errorf("new segment: %w", err)
	}
	keyring.LockReachable(oc)
	keyring.LockReachable(nc)
	j.reen, err = j.o.dev.BeginReencryption(dmcrypt.ReencryptSegment{Cipher: oc, SectorSize: old.SectorSize},
		dmcrypt.ReencryptSegment{Cipher: nc, SectorSize: new.SectorSize}, done)
	if err != nil {
		return nil, err
	}
	j.o.reen, j.o.final = j.reen, new
	return j.reen.Backend(), nil
}

// Hold keeps requests out of the hotzone [off, off+length) of data; the
// function it returns ends the step (done: bytes now in the new cipher,
// or -1 when the step failed).
func (j *ReencryptJob) Hold(off, length int64) func(done int64) {
	j.reen.Hold(off, length)
	return func(done int64) {
		if done < 0 {
			j.reen.Abandon()
			return
		}
		j.reen.Advance(done)
	}
}

// Progress records how far the job is (status) and tells the requester.
func (j *ReencryptJob) Progress(done, total int64) { j.o.progress(done, total) }

// Stop reports whether the daemon is closing or the requester went
// away: the job ends after the step it is in, with the metadata written.
func (j *ReencryptJob) Stop() bool { return j.o.stopping.Load() || j.cancel.Load() }

// onlineJob is a daemon's online reencryption, one at a time.
type onlineJob struct {
	dev      *dmcrypt.Device
	spec     Spec
	st       *State
	keys     *keyControl // its lock guards st
	stopping atomic.Bool

	mu      sync.Mutex
	running chan struct{} // closed when the job ends; nil when none runs
	report  func(line string)
	reen    *dmcrypt.Reencryption // the mapping of the first job; later ones go on with it
	final   Segment
}

func newOnlineJob(dev *dmcrypt.Device, spec Spec) *onlineJob {
	return &onlineJob{dev: dev, spec: spec}
}

// attach gives o the state it records progress in, guarded by keys' lock
// (nil: no other writer).
func (o *onlineJob) attach(st *State, keys *keyControl) {
	if o != nil {
		o.st, o.keys = st, keys
	}
}

// answer runs "reencrypt ..." from conn; it reports whether line was one.
func (o *onlineJob) answer(conn net.Conn, r *bufio.Reader, line string) bool {
	cmd, args, _ := strings.Cut(line, " ")
	if o == nil || cmd != "reencrypt" {
		return false
	}
	defer conn.Close()
	job, err := o.readJob(r, args)
	if err == nil {
		// The requester going away (luksd reencrypt interrupted) pauses
		// the job, as interrupting cryptsetup reencrypt does.
		conn.SetReadDeadline(time.Time{})
		go func() {
			io.Copy(io.Discard, r)
			job.cancel.Store(true)
		}()
		err = o.run(job, func(l string) {
			// A requester that stops reading must not stall the job.
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			fmt.Fprintln(conn, l)
		})
		conn.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		fmt.Fprintln(conn, jobReply(err))
		return true
	}
	fmt.Fprintln(conn, ctlOK)
	return true
}

// readJob reads the command's arguments and the keys that follow it.
func (o *onlineJob) readJob(r io.Reader, args string) (*ReencryptJob, error) {
	f := strings.Fields(args)
	if len(f) != 5 {
		return nil, fmt.Errorf("bad reencrypt command %q", args)
	}
	oldLen, err1 := strconv.Atoi(f[0])
	newLen, err2 := strconv.Atoi(f[1])
	hotzone, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || oldLen <= 0 || newLen <= 0 || oldLen+newLen > 1024 || hotzone < 0 {
		return nil, fmt.Errorf("bad reencrypt command %q", args)
	}
	keys, err := keyring.NewSecret(oldLen + newLen)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(r, keys.Bytes()); err != nil {
		keys.Wipe()
		return nil, fmt.Errorf("reading the keys: %v", err)
	}
	unset := func(s string) string { return strings.TrimPrefix(s, "-") }
	job := &ReencryptJob{Location: o.spec.Location, UUID: o.spec.UUID, HotzoneSize: hotzone,
		Resilience: unset(f[3]), Hash: unset(f[4]), o: o}
	job.OldKey, job.NewKey, job.secret = keys.Bytes()[:oldLen], keys.Bytes()[oldLen:], keys
	return job, nil
}
