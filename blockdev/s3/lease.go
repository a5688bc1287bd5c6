package s3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// A volume opened exclusively (blockdev.OpenOptions.Exclusive: open,
// serve) holds a lease in the store, PREFIX/luksd-lease.json: who holds
// it (host, boot, process) and until when. It is taken and renewed with
// conditional writes (If-None-Match: *, If-Match: ETAG), so of two
// openers racing for it one wins. Another opener is refused (ErrInUse)
// until the lease expires, unless the holder ran on this host and its
// process is gone (killed, crashed, or the host rebooted since): then the
// lease is taken over at once. A holder that cannot renew in time, or
// finds its lease taken, stops writing (its writes and flushes fail).
//
// The holder trusts its lease for 9/10 of its time from the start of the
// write that renewed it (the rest is a margin for clock skew and a
// request the store takes late), and no request of its own to write the
// volume outlives that: an upload's retries end there (Store.until). The
// lease lasts twice the store timeout unless set (LeaseTTLFor), so a store
// that stalls turns into the timeout's I/O errors while the lease still
// holds, and a lease that lapses all the same (a longer stall, a short
// LUKSD_S3_LEASE_SECONDS) makes writes and flushes fail at once, the
// dirty chunks kept, until a renewal succeeds.
//
// A read-only opener (Options.Exclusive and ReadOnly: open --readonly,
// copy's source) takes the lease as a writer does, so no writer comes in
// while it reads. With credentials that may only read, it cannot: then it
// is refused while someone holds the lease, and it looks at the lease
// again every quarter of its time while open: once a writer holds it, its
// reads fail (ErrWriterArrived) rather than return chunks that writer
// changes (reads before it looks again may see the writer's chunks).
//
// To break another host's lease before it expires, delete the object
// (e.g. `aws s3 rm s3://BUCKET/PREFIX/luksd-lease.json`); its holder then
// stops writing at its next renewal.
const leaseName = "luksd-lease.json"

// LeaseTTLFor is how long a lease lasts unless renewed, for a store
// whose operations time out after timeout: twice that. It is renewed
// every quarter of it, so even a stall that begins just before a renewal
// leaves 9/10 - 1/4 of it, 1.3 timeouts, before the holder stops
// trusting it: an upload that began in the stall times out first.
func LeaseTTLFor(timeout time.Duration) time.Duration { return 2 * timeout }

// leaseTrust and leaseRenewals are the part of a lease's time its holder
// trusts it, and how many renewals it gets in that time.
const (
	leaseTrust    = 0.9
	leaseRenewals = 4
)

// ErrLeaseLost: the lease expired before it could be renewed, or another
// opener took it: the volume refuses writes.
var ErrLeaseLost = errors.New("the volume's lease in the store was lost (expired or taken over)")

// ErrWriterArrived: a read-only opener found the volume's lease taken by a
// writer since it opened: its reads fail.
var ErrWriterArrived = errors.New("another opener took the volume for writing (its lease in the store)")

// LeaseHeldError refuses an opener while another holds the lease;
// errors.Is(err, blockdev.ErrInUse) holds.
type LeaseHeldError struct {
	Location string // s3://BUCKET/PREFIX
	rec      leaseRecord
	here     bool // the holder runs on this host
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%s: %v: held by host %s (pid %d) until %s", e.Location, blockdev.ErrInUse,
		e.rec.Host, e.rec.PID, e.rec.Expires.Format(time.RFC3339))
}

func (e *LeaseHeldError) Unwrap() error { return blockdev.ErrInUse }

// Holder says who holds the lease and until when, and for another
// host's lease how to break it, in a sentence that follows cryptsetup's
// "in use" line.
func (e *LeaseHeldError) Holder() string {
	until := e.rec.Expires.Local().Format(time.RFC3339)
	if e.here {
		return fmt.Sprintf("Its lease is held by pid %d on this host until %s.", e.rec.PID, until)
	}
	return fmt.Sprintf("Its lease is held by host %s (pid %d) until %s; if that host no longer runs it, "+
		"`aws s3 rm %s/%s` breaks it.", e.rec.Host, e.rec.PID, until, e.Location, leaseName)
}

// leaseRecord is the lease object.
type leaseRecord struct {
	Host       string    `json:"host"`
	BootID     string    `json:"boot_id"`
	PID        int       `json:"pid"`
	PIDStart   string    `json:"pid_start"` // the process's start time (/proc/PID/stat)
	Generation uint64    `json:"generation"`
	Expires    time.Time `json:"expires"`
	Released   bool      `json:"released,omitempty"`
}

type lease struct {
	st  *Store // its own: a renewal tries for a quarter of the TTL at most
	ttl time.Duration

	mu   sync.Mutex // one write of the lease at a time
	rec  leaseRecord
	etag string
	// validUntil is when, by the local clock (UnixNano), the lease may
	// have expired; 0 once lost. Read without mu: a renewal in progress
	// must not hold writes up.
	validUntil atomic.Int64
	done       chan struct{}
	wg         sync.WaitGroup
}

// acquireLease takes st's lease for this process, and renews it until
// release.
func acquireLease(st *Store, ttl time.Duration) (*lease, error) {
	me := thisProcess()
	for range 5 {
		b, etag, err := st.getVersion(leaseName)
		var cur leaseRecord
		ifNoneMatch := ""
		switch {
		case errors.Is(err, errNotFound):
			ifNoneMatch, etag = "*", ""
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(b, &cur); err != nil {
				return nil, fmt.Errorf("%w: %s/%s: %v", ErrLayout, st, leaseName, err)
			}
			if !cur.takeable(me, time.Now()) {
				return nil, cur.held(st, me)
			}
		}
		rec := me
		rec.Generation = cur.Generation + 1
		own := *st
		own.Timeout = ttl / leaseRenewals
		l := &lease{st: &own, ttl: ttl, rec: rec, done: make(chan struct{})}
		err = l.write(ifNoneMatch, etag)
		if errors.Is(err, errPrecondition) {
			continue // another opener got there first: look again
		}
		if err != nil {
			return nil, err
		}
		l.wg.Add(1)
		go l.renew()
		return l, nil
	}
	return nil, fmt.Errorf("%w: %s: the lease keeps changing hands", blockdev.ErrInUse, st)
}

// write writes the lease with a new expiry under the given condition.
// l.mu is held, or l not yet shared.
func (l *lease) write(ifNoneMatch, ifMatch string) error {
	start := time.Now()
	l.rec.Expires = start.Add(l.ttl).UTC()
	b, err := json.Marshal(l.rec)
	if err != nil {
		return err
	}
	etag, err := l.st.putIf(leaseName, b, ifNoneMatch, ifMatch)
	if err != nil {
		return err
	}
	// Counted from before the request: the store may have seen it late.
	l.etag = etag
	l.validUntil.Store(start.Add(time.Duration(float64(l.ttl) * leaseTrust)).UnixNano())
	return nil
}

// renew renews the lease every quarter of its time until release; it
// gives up when another opener has taken it.
func (l *lease) renew() {
	defer l.wg.Done()
	t := time.NewTicker(l.ttl / leaseRenewals)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		l.mu.Lock()
		err := l.write("", l.etag)
		if errors.Is(err, errPrecondition) && l.stillOurs() {
			err = l.write("", l.etag)
		}
		if errors.Is(err, errPrecondition) || errors.Is(err, errNotFound) {
			l.validUntil.Store(0)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// stillOurs reports whether the lease object, whose version is not the
// one we wrote last, still names this holder (a store that crashed may
// come back with an older version of our own lease, or our last write
// may have landed though we heard no answer); then it takes its ETag.
// l.mu is held.
func (l *lease) stillOurs() bool {
	b, etag, err := l.st.getVersion(leaseName)
	var cur leaseRecord
	if err != nil || json.Unmarshal(b, &cur) != nil {
		return false
	}
	me := l.rec
	if cur.Host != me.Host || cur.BootID != me.BootID || cur.PID != me.PID || cur.PIDStart != me.PIDStart || cur.Released {
		return false
	}
	l.etag = etag
	return true
}

// check returns ErrLeaseLost once the lease cannot be trusted.
func (l *lease) check() error {
	if time.Now().UnixNano() < l.until().UnixNano() {
		return nil
	}
	return ErrLeaseLost
}

// until is when the lease stops being trusted, unless renewed by then.
func (l *lease) until() time.Time { return time.Unix(0, l.validUntil.Load()) }

// release stops the renewals and marks the lease released, unless
// another opener holds it by now.
func (l *lease) release() error {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.validUntil.Load() == 0 {
		return nil
	}
	l.rec.Released = true
	err := l.write("", l.etag)
	if errors.Is(err, errPrecondition) || errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

// held is the refusal of me by the live lease r of st.
func (r leaseRecord) held(st *Store, me leaseRecord) error {
	return &LeaseHeldError{Location: st.String(), rec: r, here: r.Host == me.Host && r.BootID == me.BootID}
}

// readLease reads st's lease; ok is false when there is none.
func readLease(st *Store) (r leaseRecord, ok bool, err error) {
	b, _, err := st.getVersion(leaseName)
	if errors.Is(err, errNotFound) {
		return r, false, nil
	} else if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, fmt.Errorf("%w: %s/%s: %v", ErrLayout, st, leaseName, err)
	}
	return r, true, nil
}

// checkNoWriter refuses (LeaseHeldError) while someone holds st's lease.
func checkNoWriter(st *Store) error {
	r, ok, err := readLease(st)
	if err != nil || !ok {
		return err
	}
	if me := thisProcess(); !r.takeable(me, time.Now()) {
		return r.held(st, me)
	}
	return nil
}

// watchLease looks at st's lease every period until done is closed, and
// calls arrived once, when a writer holds it. A store that cannot be
// read is looked at again next time: the reads fail on their own.
func watchLease(st *Store, period time.Duration, done <-chan struct{}, arrived func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if err := checkNoWriter(st); errors.Is(err, blockdev.ErrInUse) {
			arrived()
			return
		}
	}
}

// LeaseHolder names the holder of st's lease ("host HOST (pid PID)"), or
// returns "" when nobody holds it: no lease, or one released, expired or
// left by a process of this host that is gone.
func LeaseHolder(st *Store) (string, error) {
	holder, _, err := Lease(st)
	return holder, err
}

// Lease is LeaseHolder with the time the lease lasts until, unless
// renewed.
func Lease(st *Store) (holder string, until time.Time, err error) {
	r, ok, err := readLease(st)
	if err != nil || !ok || r.takeable(thisProcess(), time.Now()) {
		return "", time.Time{}, err
	}
	return fmt.Sprintf("host %s (pid %d)", r.Host, r.PID), r.Expires, nil
}

// takeable reports whether me may take over the lease r at now.
func (r leaseRecord) takeable(me leaseRecord, now time.Time) bool {
	switch {
	case r.Released || now.After(r.Expires):
		return true
	case r.Host != me.Host:
		return false
	case r.BootID != me.BootID:
		return true // this host rebooted since: the holder is gone
	}
	return processStart(r.PID) != r.PIDStart
}

// thisProcess is the lease record of this process.
func thisProcess() leaseRecord {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pid := os.Getpid()
	return leaseRecord{Host: host, BootID: string(bytes.TrimSpace(boot)), PID: pid, PIDStart: processStart(pid)}
}

// processStart returns the start time of process pid (field 22 of
// /proc/PID/stat, in clock ticks since boot), or "" when there is no
// such process: with the boot ID it names one process for good, where a
// PID alone may be reused.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
