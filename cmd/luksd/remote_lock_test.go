package main

import (
	"errors"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/s3/s3test"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/luks2"
)

// A long-lived header device of a volume in a store (the online
// reencryption job's) and the header verbs of this host take turns on
// its metadata lock, and each turn reads what the store holds: a
// keyslot killed by the CLI is not brought back by the job's next
// commit from its cache (it was, before), and a CLI edit waits for the
// device's edit to end.
func TestS3HeaderEditsTakeTurns(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	w := newWorkspace(t)
	keyA, keyB := w.key("a", "first passphrase"), w.key("b", "second passphrase")
	loc := "s3://" + srv.Bucket() + "/turns"
	cheap := []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	luksd(t, nil, append([]string{"luksFormat", "-q", "--device-size", "24M", "--key-file", keyA, loc}, cheap...)...).ok(t)
	luksd(t, nil, append([]string{"luksAddKey", "-q", "--key-file", keyA, loc, keyB}, cheap...)...).ok(t)

	f, size, err := openDevice(loc, true)
	if err != nil {
		t.Fatal(err)
	}
	hw := &headerDevice{&luks2.HeaderFile{File: f, Path: loc, Size: size, LockName: remoteLockName(loc)}}
	defer hw.Close()
	read := func() *luks2.Header {
		t.Helper()
		h, err := hw.read()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	stale := read()
	if got := stale.ActiveKeyslots(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("keyslots %v before the kill", got)
	}
	luksd(t, nil, "luksKillSlot", "-q", "--key-file", keyA, loc, "1").ok(t)
	if got := read().ActiveKeyslots(); !slices.Equal(got, []int{0}) {
		t.Fatalf("the long-lived device reads keyslots %v after the CLI killed keyslot 1", got)
	}
	// An edit from the header read before the kill is refused, as a
	// job's commit would be: nothing of the kill is undone.
	label := "stale"
	err = hw.edit(func() error { return stale.SetLabel(hw, &label, nil) })
	if !errors.Is(err, luks2.ErrConcurrentUpdate) {
		t.Fatalf("an edit from a stale header: %v, want a concurrent-update refusal", err)
	}
	if got := read().ActiveKeyslots(); !slices.Equal(got, []int{0}) {
		t.Fatalf("keyslots %v after the stale edit", got)
	}

	// A CLI edit started while the device holds its exclusive lock waits
	// for it.
	args := append([]string{"luksAddKey", "-q", "--key-file", keyA, loc, keyB}, cheap...)
	cli := exec.Command(testtool.Luksd(t), args...)
	var ended chan error
	err = hw.edit(func() error {
		if err := cli.Start(); err != nil {
			return err
		}
		ended = make(chan error, 1)
		go func() { ended <- cli.Wait() }()
		select {
		case err := <-ended:
			return errors.Join(errors.New("luksAddKey ended while the device held the lock"), err)
		case <-time.After(2 * time.Second):
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("luksAddKey after the lock was released: %v", err)
	}
	if got := read().ActiveKeyslots(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("keyslots %v after the waiting luksAddKey", got)
	}
}
