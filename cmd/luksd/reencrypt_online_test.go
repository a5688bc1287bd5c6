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
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
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
					errs <- devtest.Hammer(ctx, dev, model, k, writers, 8192, uint64(k))
				}()
			}
			r := luksd(t, nil, append([]string{"reencrypt", "-q", "--progress-json", "--hotzone-size", "262144", "-d", keyFile, "online"}, c.reencrypt...)...)
			stop()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			r.ok(t)
			last := fmt.Sprintf(`"device_bytes":"%d","device_size":"%d"`, len(model), len(model))
			// No report before the first step (cryptsetup's first only starts the clock).
			if !strings.HasPrefix(r.stdout, `{"device":"online",`) || strings.Contains(r.stdout, `"device_bytes":"0"`) || !strings.Contains(r.stdout, last) {
				t.Errorf("progress of the online reencryption:\n%s", r.stdout)
			}
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
			// Suspended and resumed with the new key, without a reopen.
			luksd(t, nil, "luksSuspend", "online").expect(t, 0, "")
			luksd(t, nil, "luksResume", "--key-file", keyFile, "online").expect(t, 0, "")
			clear(got)
			if _, err := dev.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, model); i >= 0 {
				t.Fatalf("after luksSuspend and luksResume the volume differs from byte %d", i)
			}
			stopVolume(t, "online", done)
			w.checkData(img, keyFile, c, model)
		})
	}
}

// SIGINT to luksd reencrypt, or closing the daemon, pauses the job
// between two steps and the CLI returns; status says where it stands,
// also once the volume is opened again, and `luksd reencrypt NAME`
// resumes and finishes it.
func TestReencryptOnlinePauseResume(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[1]
	img, model := reencImage(w, "vol.img", c, keyFile, 40<<20)
	spec, key := openSpec(t, img, []byte("pw"), "pause", fe.Name())
	done := startDaemon(t, spec, key)
	t.Cleanup(func() { daemon.Close("pause") })
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(testtool.Luksd(t), append([]string{"reencrypt", "-q", "--hotzone-size", "65536", "-d", keyFile, "pause"}, c.reencrypt...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitProgress(t, "pause", cmd, &stderr)
		return cmd, &stderr
	}
	cmd, stderr := start()
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("luksd reencrypt interrupted: %v: %s", err, stderr.String())
	}
	st, err := daemon.Active("pause")
	if err != nil || st == nil || st.ReencryptRunning || st.ReencryptDone <= 0 || st.ReencryptDone >= st.Size {
		t.Fatalf("after SIGINT to luksd reencrypt, the daemon's state: %+v, %v", st, err)
	}

	cmd, stderr = start()
	luksd(t, nil, "reencrypt", "-q", "-d", keyFile, "pause").expect(t, exitBusy, "Reencryption process is already running.")
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

// waitProgress waits until name's daemon reports a job part-way. cli is
// the `luksd reencrypt` that asked for the job and stderr what it wrote:
// when it exits first, or the job never shows, the failure says what the
// daemon last reported and what the command said.
func waitProgress(t *testing.T, name string, cli *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st, err := daemon.Active(name)
		if err == nil && st != nil && st.ReencryptRunning && st.ReencryptDone > 0 {
			return
		}
		switch {
		case err != nil:
			last = err.Error()
		case st == nil:
			last = "no daemon"
		default:
			last = fmt.Sprintf("reencryption %q, running %v, %d of %d bytes", st.Reencryption, st.ReencryptRunning, st.ReencryptDone, st.ReencryptTotal)
		}
		if exited(cli.Process.Pid) {
			cli.Wait() // stderr is complete only once Wait returns
			t.Fatalf("luksd reencrypt exited before its online job was seen part-way (daemon: %s): %s", last, stderr)
		}
	}
	cli.Process.Kill()
	cli.Wait()
	t.Fatalf("the online reencryption never got going (daemon: %s; luksd reencrypt: %s)", last, stderr)
}

// exited reports whether the child pid has exited and waits to be reaped.
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}

// killedDaemonEnv names the image TestHelperOnlineDaemon serves when the
// test binary is run again as a daemon that a test kills -9.
const killedDaemonEnv = "LUKSD_TEST_ONLINE_DAEMON_IMAGE"

// TestHelperOnlineDaemon is not a test: run by TestReencryptOnlineKilled
// as a process of its own, it serves the image "killed" with the fake
// frontend until it is killed.
func TestHelperOnlineDaemon(t *testing.T) {
	img := os.Getenv(killedDaemonEnv)
	if img == "" {
		t.Skip("only the daemon process of TestReencryptOnlineKilled")
	}
	fe := fakeFrontend()
	spec, key := openSpec(t, img, []byte("pw"), "killed", fe.Name())
	if err := daemon.Run(spec, key, daemon.RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A daemon killed -9 in the middle of an online reencryption leaves a
// header both tools resume (each on its own copy) to the data written
// before, and that luksd's open maps part-way.
func TestReencryptOnlineKilled(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	c := reencCases[1]
	img, model := reencImage(w, "vol.img", c, keyFile, 40<<20)
	d := exec.Command(os.Args[0], "-test.run=^TestHelperOnlineDaemon$")
	d.Env = append(os.Environ(), killedDaemonEnv+"="+img)
	var dout bytes.Buffer
	d.Stdout, d.Stderr = &dout, &dout
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); !daemon.Alive("killed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never started: %s", dout.String())
		}
	}
	cli := exec.Command(testtool.Luksd(t), append([]string{"reencrypt", "-q", "--hotzone-size", "65536", "-d", keyFile, "killed"}, c.reencrypt...)...)
	var clierr bytes.Buffer
	cli.Stderr = &clierr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, "killed", cli, &clierr)
	time.Sleep(time.Duration(mrand.IntN(20)) * time.Millisecond)
	d.Process.Kill()
	d.Wait()
	if err := cli.Wait(); err == nil {
		t.Error("luksd reencrypt succeeded although its daemon was killed")
	}
	if s := w.cs(nil, "luksDump", img).ok(t).stdout; !strings.Contains(s, "online-reencrypt") {
		t.Fatalf("the killed job left no reencryption to resume:\n%s", s)
	}
	csImg, openImg := w.path("cs.img"), w.path("open.img")
	copyFile(t, img, csImg)
	copyFile(t, img, openImg)

	fe := fakeFrontend()
	spec, key := openSpec(t, openImg, []byte("pw"), "reopened", fe.Name())
	done := startDaemon(t, spec, key)
	got := make([]byte, len(model))
	if _, err := fe.Last().Dev.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, model); i >= 0 {
		t.Errorf("luksd opens the killed job's volume wrong from byte %d", i)
	}
	stopVolume(t, "reopened", done)

	luksd(t, nil, "reencrypt", "-q", "--resume-only", "-d", keyFile, img).ok(t)
	w.checkData(img, keyFile, c, model)
	w.finishWithCryptsetup(csImg, keyFile)
	w.checkData(csImg, keyFile, c, model)
}

// A volume `luksd serve` exports is reencrypted online by `luksd
// reencrypt IMAGE` while a client writes through NBD; stopping the server
// afterwards leaves the new cipher with what the client wrote.
func TestReencryptOnlineServe(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	c := reencCases[0]
	img, want := reencImage(w, "vol.img", c, keyFile, 24<<20)
	sock := w.path("sock")
	p := startServe(t, sock, "-d", keyFile, img)
	cmd := exec.Command(testtool.Luksd(t), append([]string{"reencrypt", "-q", "--hotzone-size", "65536", "-d", keyFile, img}, c.reencrypt...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("serve-%d", p.cmd.Process.Pid)
	waitProgress(t, name, cmd, &stderr)
	src := w.path("src")
	for off := int64(4096*3 + 100); off < int64(len(want)); off += 2<<20 + 777 {
		data := make([]byte, 100<<10)
		rand.Read(data)
		copy(want[off:], data)
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		testtool.Run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -s %s %d %d", src, off, len(data)), "-c", "flush", p.uri())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("luksd reencrypt of a served image: %v: %s", err, stderr.String())
	}
	if s := luksd(t, nil, "status", name).ok(t).stdout; !strings.Contains(s, "cipher:  "+c.newCipher) || strings.Contains(s, "reencryption") {
		t.Errorf("status of the served volume after the reencryption:\n%s", s)
	}
	// A second reencryption (a new key) in the same server.
	luksd(t, nil, "reencrypt", "-q", "-d", keyFile, img).ok(t)
	p.stop(t)
	if daemon.Alive(name) {
		t.Errorf("%s is still active after the server stopped", name)
	}
	w.checkData(img, keyFile, c, want)
}

// A daemon refuses a job whose old key is not the key it serves the
// volume with (the header changed under it), and rewrites nothing.
func TestReencryptOnlineRefusesOtherKey(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[0]
	img, model := reencImage(w, "vol.img", c, keyFile, 20<<20)
	spec, key := openSpec(t, img, []byte("pw"), "other", fe.Name())
	key.Wipe()
	other, err := keyring.FromBytes(randomBytes(t, spec.Segment.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	done := startDaemon(t, spec, other)
	luksd(t, nil, append([]string{"reencrypt", "-q", "-d", keyFile, "other"}, c.reencrypt...)...).expect(t, exitParams, "is not the one other was opened with")
	stopVolume(t, "other", done)
	luksd(t, nil, "reencrypt", "-q", "--resume-only", "-d", keyFile, img).ok(t)
	w.checkData(img, keyFile, c, model)
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A volume open read-only is not reencrypted online, nor marked for it.
func TestReencryptOnlineRefusesReadOnly(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[0]
	img, _ := reencImage(w, "vol.img", c, keyFile, 20<<20)
	spec, key := openSpec(t, img, []byte("pw"), "ro", fe.Name())
	spec.Options.ReadOnly = true
	done := startDaemon(t, spec, key)
	luksd(t, nil, append([]string{"reencrypt", "-q", "-d", keyFile, "ro"}, c.reencrypt...)...).expect(t, exitParams, "Volume ro is open read-only")
	stopVolume(t, "ro", done)
	if s := w.cs(nil, "luksDump", img).ok(t).stdout; strings.Contains(s, "reencrypt") {
		t.Errorf("a refused online reencryption marked the volume:\n%s", s)
	}
}
