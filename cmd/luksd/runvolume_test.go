package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
)

// TestRunVolumeCryptsetupImage runs the daemon's whole open path on a
// cryptsetup-made image (header, segment, crypt layer, state) with the fake
// frontend: data written through the attachment survives close and reopen,
// is encrypted on disk, and the state describes the volume.
func TestRunVolumeCryptsetupImage(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	img := testtool.Image(t, 20<<20)
	pass := testtool.KeyFile(t, []byte("passphrase"))
	vk := make([]byte, 64)
	rand.Read(vk)
	testtool.CryptsetupFormat(t, img, pass, "--type", "luks2", "--sector-size", "4096", "--volume-key-file", testtool.KeyFile(t, vk))

	fe := fakeFrontend()
	logged := captureLog(t)
	start := func() chan error {
		v := imageVolume(t, img, img, bytes.Clone(vk))
		done := startDaemon(t, v.spec("e2e", daemon.Options{Frontend: fe.Name(), IOTimeout: 7 * time.Second}), v.Key)
		if v.Key.Len() != 0 {
			t.Error("the volume key was not wiped once the crypt layer had it")
		}
		return done
	}

	done := start()
	st, err := daemon.Active("e2e")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	if st.Type != "LUKS2" || st.Cipher != "aes-xts-plain64" || st.KeySize != 64 || st.SectorSize != 4096 ||
		st.Offset != 16<<20 || st.Size != 4<<20 || st.ReadOnly {
		t.Fatalf("state %+v", st)
	}
	if bs := fe.Last().Opts.BlockSize; bs != 4096 {
		t.Fatalf("attached with block size %d, want the sector size 4096", bs)
	}
	if to := fe.Last().Opts.IOTimeout; to != 7*time.Second {
		t.Fatalf("attached with I/O timeout %v, want open's 7s", to)
	}
	pattern := make([]byte, 3*4096)
	rand.Read(pattern)
	if _, err := fe.Last().Dev.WriteAt(pattern, 5*4096); err != nil {
		t.Fatal(err)
	}
	stopVolume(t, "e2e", done)

	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, pattern[:512]) {
		t.Fatal("the plaintext is on disk")
	}

	done = start()
	got := make([]byte, len(pattern))
	if _, err := fe.Last().Dev.ReadAt(got, 5*4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern) {
		t.Fatal("data differs after close and reopen")
	}
	stopVolume(t, "e2e", done)

	// The daemon's log tells each activation and its end.
	log := logged.String()
	active := "e2e: LUKS2 " + img + " active on " + st.Device + " (frontend fake, pid "
	if n := strings.Count(log, active); n != 2 {
		t.Errorf("log has %d lines %q, want 2:\n%s", n, active, log)
	}
	if n := strings.Count(log, "e2e: closed\n"); n != 2 {
		t.Errorf("log has %d lines \"e2e: closed\", want 2:\n%s", n, log)
	}
}
