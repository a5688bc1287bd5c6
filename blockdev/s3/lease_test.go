package s3

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// putLease writes a lease record as another holder would.
func putLease(t *testing.T, st *Store, r leaseRecord) {
	t.Helper()
	b, _ := json.Marshal(r)
	if err := st.put(leaseName, b, false); err != nil {
		t.Fatal(err)
	}
}

func TestLease(t *testing.T) {
	srv := s3test.Start(t)
	st := NewStore(srv.Client(), srv.Bucket(), "leased")
	if err := Create(st, 4*testChunk, testChunk); err != nil {
		t.Fatal(err)
	}
	excl := Options{Exclusive: true}

	// A second opener is refused while the first is open, not after.
	a, err := OpenVolume(st, excl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVolume(st, excl); !errors.Is(err, blockdev.ErrInUse) {
		t.Fatalf("a second exclusive open: %v, want ErrInUse", err)
	}
	if _, err := OpenVolume(st, Options{Exclusive: true, ReadOnly: true}); !errors.Is(err, blockdev.ErrInUse) {
		t.Fatalf("a read-only exclusive open beside a writer: %v, want ErrInUse", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := OpenVolume(st, excl)
	if err != nil {
		t.Fatalf("open after the holder closed: %v", err)
	}
	b.Close()

	// A holder on this host whose process is gone (kill -9) is taken over
	// at once; one on another host only once its lease expires.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	me := thisProcess()
	gone := me
	gone.PID, gone.PIDStart, gone.Expires = dead.Process.Pid, "1", time.Now().Add(time.Hour)
	putLease(t, st, gone)
	if v, err := OpenVolume(st, excl); err != nil {
		t.Fatalf("open over a dead local holder: %v", err)
	} else {
		v.Close()
	}
	other := gone
	other.Host = "elsewhere"
	putLease(t, st, other)
	if _, err := OpenVolume(st, excl); !errors.Is(err, blockdev.ErrInUse) {
		t.Fatalf("open over another host's live lease: %v, want ErrInUse", err)
	}
	other.Expires = time.Now().Add(-time.Second)
	putLease(t, st, other)
	if v, err := OpenVolume(st, excl); err != nil {
		t.Fatalf("open over another host's expired lease: %v", err)
	} else {
		v.Close()
	}

	// A holder whose lease is taken stops writing at its next renewal.
	c, err := OpenVolume(st, Options{Exclusive: true, LeaseTTL: 900 * time.Millisecond, WriteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteAt([]byte("mine"), 0); err != nil { // dirty until a flush
		t.Fatal(err)
	}
	if err := st.delete(leaseName); err != nil { // the documented break
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.WriteAt([]byte("still mine?"), 0)
		if errors.Is(err, ErrLeaseLost) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes after the lease was broken: %v, want ErrLeaseLost", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Flush(); err == nil {
		t.Error("a flush after the lease was lost succeeded")
	}
}

// The lease outlasts a store's timeout: a stall that begins just before
// a renewal still leaves the holder's trust in its lease longer than an
// upload that began in the stall tries, so the stall is the timeout's
// I/O error, not a lost lease, and no upload ever runs past the lease.
func TestLeaseTTLFor(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, DefaultTimeout, 10 * time.Minute} {
		ttl := LeaseTTLFor(timeout)
		left := time.Duration(float64(ttl)*leaseTrust) - ttl/leaseRenewals
		if left <= timeout {
			t.Errorf("timeout %v: lease %v leaves %v after a stall, not more than the timeout", timeout, ttl, left)
		}
	}
	var o Options
	o.fill(testChunk, DefaultTimeout)
	if o.LeaseTTL != LeaseTTLFor(DefaultTimeout) {
		t.Errorf("default lease %v, want LeaseTTLFor(%v)", o.LeaseTTL, DefaultTimeout)
	}
}

// A holder whose store stalls past its lease stops at the lease: its
// flush fails with ErrLeaseLost, not after the store's (here far longer)
// timeout, and so do its writes; once the store answers again and the
// lease is renewed, the dirty chunks go up and writes work again, without
// reopening.
func TestLeaseBoundsAStalledStore(t *testing.T) {
	srv := s3test.Start(t)
	st := NewStore(srv.Client(), srv.Bucket(), "stalled")
	st.Timeout = time.Hour
	if err := Create(st, 4*testChunk, testChunk); err != nil {
		t.Fatal(err)
	}
	v, err := OpenVolume(st, Options{Exclusive: true, LeaseTTL: 3 * time.Second, WriteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	srv.Pause()
	// A whole chunk: cached without a read of the store, uploaded only
	// by the flush.
	if _, err := v.WriteAt(bytes.Repeat([]byte{7}, testChunk), 0); err != nil {
		srv.Resume()
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- v.Flush() }()
	select {
	case err := <-flushed:
		if !errors.Is(err, ErrLeaseLost) {
			srv.Resume()
			t.Fatalf("a flush with the store stalled: %v, want ErrLeaseLost", err)
		}
	case <-time.After(60 * time.Second):
		srv.Resume()
		t.Fatal("a flush with the store stalled still waits a minute on, its lease long lapsed")
	}
	if _, err := v.WriteAt([]byte("during the stall"), 0); !errors.Is(err, ErrLeaseLost) {
		srv.Resume()
		t.Fatalf("a write with the lease lapsed: %v, want ErrLeaseLost", err)
	}

	srv.Resume()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := v.WriteAt([]byte("after the stall!"), 0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes 30 s after the store came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	flush(t, v)
	b, err := st.get(chunkName(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b[:16]); got != "after the stall!" {
		t.Fatalf("the store holds %q, want the write after the stall", got)
	}
}
