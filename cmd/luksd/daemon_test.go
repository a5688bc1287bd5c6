package main

import (
	"crypto/rand"
	"os"
	"testing"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/daemon/daemontest"
	"github.com/luksd/luksd/daemon/frontend"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
)

// fakeFrontend registers a fresh daemontest.Fake as the "fake" frontend:
// daemons in this process attach nothing, and the test reaches the device
// they serve.
func fakeFrontend() *daemontest.Fake {
	fe := &daemontest.Fake{}
	frontend.Register(fe)
	return fe
}

// captureLog sends the daemon's log to a buffer for the test.
func captureLog(t *testing.T) *daemontest.LogBuffer {
	var b daemontest.LogBuffer
	daemon.Log.SetOutput(&b)
	t.Cleanup(func() { daemon.Log.SetOutput(os.Stderr) })
	return &b
}

// startDaemon runs spec's daemon in this process with key and waits until
// it is ready.
func startDaemon(t *testing.T, spec daemon.Spec, key *keyring.Secret) chan error {
	t.Helper()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- daemon.Run(spec, key, daemon.RunOptions{Ready: func(d string) { ready <- d }}) }()
	daemontest.WaitReady(t, ready, done)
	return done
}

// startFake runs a daemon for name with the fake frontend over a sparse
// image holding a 1 MiB aes-xts volume at 16 MiB (a random key: no header
// needed, the daemon reads none), and waits until it is ready.
func startFake(t *testing.T, name string) (*daemontest.Fake, chan error) {
	t.Helper()
	fe := fakeFrontend()
	img := testtool.ImageAt(t, t.TempDir(), name+".img", 17<<20)
	vk := make([]byte, 64)
	rand.Read(vk)
	key, err := keyring.FromBytes(vk)
	if err != nil {
		t.Fatal(err)
	}
	spec := daemon.Spec{Name: name, Location: img, Header: img, Type: "LUKS2",
		Segment: daemon.Segment{Cipher: "aes-xts-plain64", Offset: 16 << 20, Size: 1 << 20, SectorSize: 4096, KeySize: 64},
		Options: daemon.Options{Frontend: fe.Name()}}
	return fe, startDaemon(t, spec, key)
}

// imageVolume reads the LUKS header of image (at header) and returns the
// volume as open would after unlocking it with vk.
func imageVolume(t *testing.T, image, header string, vk []byte) *volume {
	t.Helper()
	f, err := os.Open(header)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := luks2.Read(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := h.Segment()
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyring.FromBytes(vk)
	if err != nil {
		t.Fatal(err)
	}
	return &volume{Path: image, HeaderPath: header, Header: h, Segment: seg, Key: key}
}

func waitDaemon(t *testing.T, done chan error) error { return daemontest.Wait(t, done) }

// stopVolume closes volume name and waits until its daemon ends.
func stopVolume(t *testing.T, name string, done chan error) {
	t.Helper()
	daemontest.Stop(t, func() error { return closeVolume(name) }, done)
}
