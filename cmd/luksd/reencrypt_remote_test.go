package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/luks2"
)

// Reencryption of volumes that live behind a location, not in a local
// file: an NBD export (a real nbdkit) and an S3 object store (a real
// SeaweedFS). Each volume is reencrypted offline on its location, killed
// -9 part-way and resumed; then online, by its location, in a `luksd
// serve` of it that a client writes through, the server killed -9
// part-way, served again and the job resumed in the new server. The
// ciphertext then decrypts, with the key cryptsetup reads from the
// header, to everything written, and the header holds no reencryption.

// remoteCase is the reencryption each test runs first (offline): from
// aes-cbc-essiv to aes-xts in 512-byte sectors; the online one after it
// changes the key size, so the data ends in aes-xts, 512-byte sectors.
var remoteCase = reencCases[1]

// reencryptProgressAt reads how many bytes of data the reencryption of
// the volume at loc has done, or -1 when it is not in reencryption (or
// the header cannot be read just now: a writer may be between copies).
func reencryptProgressAt(loc string) (done, total int64) {
	f, size, err := openDevice(loc, false)
	if err != nil {
		return -1, 0
	}
	defer f.Close()
	hf := &luks2.HeaderFile{File: f, Path: loc, Size: size, NoLocks: true}
	h, err := hf.Read()
	if err != nil || !h.InReencryption() {
		return -1, 0
	}
	l, err := h.ReencryptLayout(size)
	if err != nil {
		return -1, 0
	}
	return l.Done, l.Total
}

// killOfflinePartWay runs an offline `luksd reencrypt args... loc` and
// kills it -9 once the header says it is part-way. It reports whether
// it did (false: the run ended first, with success).
func killOfflinePartWay(t *testing.T, loc string, args ...string) bool {
	t.Helper()
	cmd := exec.Command(testtool.Luksd(t), append(append([]string{"reencrypt"}, args...), loc)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("luksd reencrypt %s: %v: %s", loc, err, stderr.String())
			}
			return false
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("luksd reencrypt %s made no progress in 2 minutes: %s", loc, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if done, total := reencryptProgressAt(loc); done > 0 && done < total {
			cmd.Process.Kill()
			err := <-exited
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				// It finished (or failed) before the signal.
				if err != nil {
					t.Fatalf("luksd reencrypt %s: %v: %s", loc, err, stderr.String())
				}
				return false
			}
			return true
		}
	}
}

// settleS3 gives the object store time to finish the uploads a killed
// client had sent it whole: a header upload landing after the next
// process read the header would stop that one with "concurrent LUKS2
// metadata update". (A lease fences the data; the store has no way to
// tell when a dead client's requests are done.)
func settleS3() { time.Sleep(time.Second) }

// reencryptRemote runs the offline and the online reencryptions with
// their kills on the volume at loc, whose plaintext is model; it returns
// the plaintext after the writes the online part makes. settle returns
// once the store has carried out what a killed client had sent it.
func reencryptRemote(t *testing.T, w *workspace, loc, key string, model []byte, settle func()) []byte {
	model = bytes.Clone(model)
	ld := testtool.Luksd(t)
	flags := []string{"-q", "--hotzone-size", "262144", "-d", key}

	// Offline, directly on the location: killed part-way (each try that
	// finished first leaves a volume to reencrypt again), then resumed.
	killed := false
	for try := 0; try < 5 && !killed; try++ {
		killed = killOfflinePartWay(t, loc, append(flags, remoteCase.reencrypt...)...)
	}
	if !killed {
		t.Fatal("five offline runs ended before the header showed them part-way: the kill went untested")
	}
	settle()
	if done, total := reencryptProgressAt(loc); done <= 0 || done >= total {
		t.Fatalf("after the kill the header says %d of %d bytes done, want part-way", done, total)
	}
	runTool(t, nil, ld, append([]string{"reencrypt", "--resume-only", loc}, flags...)...).ok(t)
	if done, _ := reencryptProgressAt(loc); done != -1 {
		t.Fatalf("the resumed offline reencryption left the volume in reencryption (%d bytes done)", done)
	}

	// Online: `luksd reencrypt LOCATION` finds the server of the location
	// and hands it the job; a client writes through the server meanwhile.
	sock := w.path("serve.sock")
	p := startServe(t, sock, "-d", key, loc)
	name := fmt.Sprintf("serve-%d", p.cmd.Process.Pid)
	cmd := exec.Command(ld, append([]string{"reencrypt", "--key-size", "256", loc}, flags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, name, cmd, &stderr)
	write := func(p *serveProc, off int64) {
		t.Helper()
		data := make([]byte, 96<<10)
		rand.Read(data)
		copy(model[off:], data)
		src := w.path("src")
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		testtool.Run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -s %s %d %d", src, off, len(data)), "-c", "flush", p.uri())
	}
	write(p, 4096*5+512)
	write(p, int64(len(model))-200<<10)
	if st, err := daemon.Active(name); err != nil || st == nil || !st.ReencryptRunning {
		t.Fatalf("the online job ended before the kill (%+v, %v): the kill went untested\n%s", st, err, stderr.String())
	}
	p.cmd.Process.Kill()
	<-p.exited
	settle()
	if err := cmd.Wait(); err == nil {
		t.Error("luksd reencrypt succeeded although its server was killed")
	}
	if done, total := reencryptProgressAt(loc); done <= 0 || done >= total {
		t.Fatalf("after the server's kill the header says %d of %d bytes done, want part-way", done, total)
	}

	// Served again (the crashed hotzone recovered), the client reads what
	// it wrote, and the job resumes in the new server.
	p = startServe(t, sock, "-d", key, loc)
	back := w.path("back")
	testtool.Run(t, "nbdcopy", p.uri(), back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("served part-way after the kill, the volume differs from what was written (%v, first diff %d)", err, firstDiff(got, model))
	}
	runTool(t, nil, ld, append([]string{"reencrypt", "--resume-only", loc}, flags...)...).ok(t)
	if s := luksd(t, nil, "status", fmt.Sprintf("serve-%d", p.cmd.Process.Pid)).ok(t).stdout; strings.Contains(s, "reencryption") {
		t.Errorf("status after the resumed online reencryption:\n%s", s)
	}
	write(p, 1<<20+3*4096)
	p.stop(t)
	return model
}

// A volume behind a real NBD server (nbdkit's file plugin) is
// reencrypted offline and online by its URI, with a kill -9 in each.
func TestReencryptRemoteNBD(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	disk, model := reencImage(w, "remote.img", remoteCase, key, 40<<20)
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	nbdkit := testtool.StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock, "file", disk)
	// nbdkit still carries out the requests of a connection whose client
	// was killed; it closes the connection when it has.
	model = reencryptRemote(t, w, "nbd+unix:///?socket="+sock, key, model, nbdkit.WaitIdle)
	w.checkData(disk, key, remoteCase, model)
}

// A volume marked for reencryption behind an NBD location gets the
// argument checks a local one gets: --decrypt conflicts with the mode
// and --keep-key resumes it, as cryptsetup does on a local copy (exit
// code and words; marked or not after).
func TestReencryptRemoteMarkedArgsLikeCryptsetup(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	marked := w.image("marked.img")
	w.cs(nil, append([]string{"luksFormat", "-q", marked, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, marked).ok(t)
	local, remote := w.path("local.img"), w.path("remote.img")
	copyFile(t, marked, remote)
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	testtool.StartPeerServer(t, "unix", sock, "nbdkit", "-f", "-U", sock, "file", remote)
	loc := "nbd+unix:///?socket=" + sock
	for _, args := range [][]string{{"--keep-key"}, {"--decrypt"}, {"--keep-key", "--decrypt"}} {
		copyFile(t, marked, local)
		copyFile(t, marked, remote) // in place: nbdkit serves the new bytes
		line := append([]string{"reencrypt", "--force-offline-reencrypt", "-q", "-d", key}, args...)
		want := w.cs(nil, append(line, local)...)
		got := w.luksd(nil, append(line, loc)...)
		if want.code != got.code || want.stderr != got.stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd on %s exit %d %q", args, want.code, want.stderr, loc, got.code, got.stderr)
		}
		wm := strings.Contains(w.cs(nil, "luksDump", local).ok(t).stdout, "online-reencrypt")
		gm := strings.Contains(w.cs(nil, "luksDump", remote).ok(t).stdout, "online-reencrypt")
		if wm != gm {
			t.Errorf("%v: cryptsetup left the volume marked: %v, luksd: %v", args, wm, gm)
		}
	}
}
