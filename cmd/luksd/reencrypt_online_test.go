package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
)

// openSpec unlocks img with pass as open does (both keys and the
// segments when it is in reencryption) and returns the daemon's spec
// for name on frontend fe, and the key.
func openSpec(t *testing.T, img string, pass []byte, name, fe string) (daemon.Spec, *keyring.Secret) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hf := &luks2.HeaderFile{File: f, Path: img, Size: st.Size()}
	h, err := hf.Read()
	if err != nil {
		t.Fatal(err)
	}
	v := &volume{Path: img, HeaderPath: img, Header: h}
	var key []byte
	if h.InReencryption() {
		m, err := h.OpenReencrypting(hf, hf.Size, pass, -1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Wipe()
		v.Segment, v.Reencrypting, v.oldKeySize = m.Final, m.Segments, len(m.OldKey)
		key = append(bytes.Clone(m.OldKey), m.NewKey...)
	} else {
		if key, _, err = h.Unlock(f, pass, -1); err != nil {
			t.Fatal(err)
		}
		if v.Segment, err = h.Segment(); err != nil {
			t.Fatal(err)
		}
	}
	k, err := keyring.FromBytes(key)
	if err != nil {
		t.Fatal(err)
	}
	return v.spec(name, daemon.Options{Frontend: fe}), k
}

// hammer writes random data to its own blocks of dev (every nth of
// blockSize bytes, from the kth) until ctx ends, reading each back at
// once; it records what it wrote in model and reports the first
// mismatch or failure.
func hammer(ctx context.Context, dev blockdev.Device, model []byte, k, n, blockSize int, seed uint64) error {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	blocks := len(model) / blockSize
	got := make([]byte, blockSize)
	for ctx.Err() == nil {
		b := k + n*rng.IntN((blocks-k+n-1)/n)
		if b >= blocks {
			continue
		}
		// A piece of the block, unaligned at times (read-modify-write).
		lo := rng.IntN(blockSize / 2)
		hi := blockSize/2 + rng.IntN(blockSize/2) + 1
		off := int64(b*blockSize + lo)
		data := make([]byte, hi-lo)
		rand.Read(data)
		if _, err := dev.WriteAt(data, off); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		copy(model[b*blockSize+lo:], data)
		if _, err := dev.ReadAt(got, int64(b*blockSize)); err != nil {
			return fmt.Errorf("read at %d: %w", b*blockSize, err)
		}
		if !bytes.Equal(got, model[b*blockSize:(b+1)*blockSize]) {
			return fmt.Errorf("block %d reads back wrong right after its write", b)
		}
	}
	return nil
}

// A volume open in a daemon is reencrypted online by `luksd reencrypt
// NAME` while writers hammer it, the hotzone included: every write lands
// (read back at once and at the end), and the result is the new cipher
// with the header cryptsetup leaves, which cryptsetup reads.
func TestReencryptOnlineUnderWriters(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	for _, c := range reencCases {
		t.Run(c.name, func(t *testing.T) {
			w := &workspace{t: t, dir: t.TempDir(), cryptsetup: w.cryptsetup}
			img, model := reencImage(w, "vol.img", c, keyFile, 24<<20)
			spec, key := openSpec(t, img, []byte("pw"), "online", fe.Name())
			done := startDaemon(t, spec, key)
			t.Cleanup(func() { daemon.Close("online") })
			dev := fe.Last().Dev
			ctx, stop := context.WithCancel(context.Background())
			const writers = 4
			errs := make(chan error, writers)
			var wg sync.WaitGroup
			for k := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- hammer(ctx, dev, model, k, writers, 8192, uint64(k))
				}()
			}
			r := luksd(t, nil, append([]string{"reencrypt", "-q", "--hotzone-size", "262144", "-d", keyFile, "online"}, c.reencrypt...)...)
			stop()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			r.ok(t)
			got := make([]byte, len(model))
			if _, err := dev.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, model); i >= 0 {
				t.Fatalf("after the reencryption the volume differs from what was written from byte %d", i)
			}
			if s := luksd(t, nil, "status", "online").ok(t).stdout; strings.Contains(s, "reencryption") || !strings.Contains(s, "cipher:  "+c.newCipher) {
				t.Errorf("status after the reencryption:\n%s", s)
			}
			stopVolume(t, "online", done)
			w.checkData(img, keyFile, c, model)
		})
	}
}

// Closing the daemon pauses its job between two steps; the CLI that
// started it returns, status says where it stands once opened again, and
// `luksd reencrypt NAME` in the new daemon resumes and finishes it.
func TestReencryptOnlinePauseResume(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[1]
	img, model := reencImage(w, "vol.img", c, keyFile, 40<<20)
	spec, key := openSpec(t, img, []byte("pw"), "pause", fe.Name())
	done := startDaemon(t, spec, key)
	cmd := exec.Command(testtool.Luksd(t), append([]string{"reencrypt", "-q", "--hotzone-size", "65536", "-d", keyFile, "pause"}, c.reencrypt...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, "pause")
	stopVolume(t, "pause", done)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("luksd reencrypt when its daemon closed: %v: %s", err, stderr.String())
	}

	spec, key = openSpec(t, img, []byte("pw"), "pause", fe.Name())
	if len(spec.Segments) != 2 {
		t.Fatalf("paused volume maps %d segments, want 2 (the job ran on to the end?)", len(spec.Segments))
	}
	done = startDaemon(t, spec, key)
	s := luksd(t, nil, "status", "pause").ok(t).stdout
	if !strings.Contains(s, "  reencryption:  in-progress\n") || !strings.Contains(s, "  reencrypted: ") || !strings.Contains(s, "paused") {
		t.Errorf("status of a paused reencryption:\n%s", s)
	}
	luksd(t, nil, "reencrypt", "-q", "--resume-only", "-d", keyFile, "pause").ok(t)
	got := make([]byte, len(model))
	if _, err := fe.Last().Dev.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, model); i >= 0 {
		t.Fatalf("after the resumed reencryption the volume differs from byte %d", i)
	}
	stopVolume(t, "pause", done)
	w.checkData(img, keyFile, c, model)
}

// waitProgress waits until name's daemon reports a job part-way.
func waitProgress(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st, err := daemon.Active(name)
		if err == nil && st != nil && st.ReencryptRunning && st.ReencryptDone > 0 {
			return
		}
	}
	t.Fatal("the online reencryption never got going")
}
