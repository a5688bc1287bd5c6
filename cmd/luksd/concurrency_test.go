package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/luks2"
	"golang.org/x/sys/unix"
)

// editor is one header edit run by one tool.
type editor struct {
	tool string // "luksd" or "cryptsetup"
	op   string // "add" (luksAddKey) or "change" (luksChangeKey)
}

// slowUnlock makes opening the existing passphrase take a while (about
// 40 ms here), so that both editors have read the header before either
// writes it: the race the metadata locks are for.
var slowUnlock = []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "200000"}

// TestConcurrentEditorsLoseNothing runs two header editors at once on one
// image, luksd and cryptsetup in every mix, 56 times (each of the 7 pairs
// on an image of each formatter, 4 times over): a passphrase whose
// command succeeded must open the volume afterwards, a passphrase that was
// not changed must still open it, and a command that fails must fail
// cleanly (cryptsetup's concurrent-update message, or no key when the
// other editor changed it first).
func TestConcurrentEditorsLoseNothing(t *testing.T) {
	w := newWorkspace(t)
	bins := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	base := w.key("base", "base passphrase")
	pairs := [][2]editor{
		{{"luksd", "add"}, {"luksd", "add"}},
		{{"luksd", "change"}, {"luksd", "add"}},
		{{"luksd", "add"}, {"cryptsetup", "add"}},
		{{"cryptsetup", "add"}, {"luksd", "change"}},
		{{"luksd", "change"}, {"cryptsetup", "add"}},
		{{"cryptsetup", "change"}, {"luksd", "add"}},
		{{"cryptsetup", "add"}, {"cryptsetup", "add"}},
	}
	failedCleanly := 0
	const trials = 56
	for trial := 0; trial < trials; trial++ {
		pair := pairs[trial%len(pairs)]
		img := w.image("race.img")
		formatter := []string{"cryptsetup", "luksd"}[trial%2]
		r := runTool(t, nil, bins[formatter], append(append([]string{"luksFormat", "-q"}, slowUnlock...), img, base)...)
		if r.code != 0 {
			t.Fatalf("%s luksFormat: %s", formatter, r.stderr)
		}
		var cmds [2]*exec.Cmd
		var outs [2]*bytes.Buffer
		var newKeys [2]string
		for i, e := range pair {
			newKeys[i] = w.key(fmt.Sprintf("new%d", i), fmt.Sprintf("new passphrase %d of trial %d", i, trial))
			verb := map[string]string{"add": "luksAddKey", "change": "luksChangeKey"}[e.op]
			args := append(append([]string{verb, "-q"}, cheapPBKDF("pbkdf2")...), "-d", base, img, newKeys[i])
			cmds[i] = exec.Command(bins[e.tool], args...)
			outs[i] = &bytes.Buffer{}
			cmds[i].Stderr = outs[i]
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		var codes [2]int
		for i, c := range cmds {
			var ee *exec.ExitError
			if err := c.Wait(); errors.As(err, &ee) {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
		}
		what := fmt.Sprintf("trial %d (%s-formatted): %s %s [exit %d] beside %s %s [exit %d]", trial, formatter,
			pair[0].tool, pair[0].op, codes[0], pair[1].tool, pair[1].op, codes[1])
		changed := false
		for i, e := range pair {
			stderr := strings.TrimSpace(outs[i].String())
			switch codes[i] {
			case 0:
				if !w.opens(img, newKeys[i]) {
					t.Errorf("%s: the new passphrase of %s %s (exit 0) does not open the volume", what, e.tool, e.op)
				}
				changed = changed || e.op == "change"
			case 1, 2:
				// 1: the header changed under it (cryptsetup's words);
				// 2: the other editor changed the passphrase it used.
				failedCleanly++
				if codes[i] == 1 && !strings.HasSuffix(stderr, "Detected attempt for concurrent LUKS2 metadata update. Aborting operation.") {
					t.Errorf("%s: %s %s failed with %q", what, e.tool, e.op, stderr)
				}
			default:
				t.Errorf("%s: %s %s exit %d: %q", what, e.tool, e.op, codes[i], stderr)
			}
		}
		if opens := w.opens(img, base); opens == changed {
			t.Errorf("%s: the base passphrase opens %v after a change that succeeded: %v", what, opens, changed)
		}
		if r := w.luksd(nil, "luksDump", img); r.code != 0 {
			t.Errorf("%s: luksd cannot read the header: %s", what, r.stderr)
		}
		os.Remove(img)
	}
	t.Logf("%d of %d edits failed cleanly beside the other", failedCleanly, 2*trials)
}

// lockTarget is what cryptsetup flocks for path: the image file, or
// /run/cryptsetup/L_MAJOR:MINOR for a block device.
func lockTarget(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		return fmt.Sprintf("/run/cryptsetup/L_%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return path
}

// blockedOnLock reports whether process pid waits for a flock (a "->"
// line of /proc/locks).
func blockedOnLock(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[1] == "->" && f[2] == "FLOCK" && f[5] == fmt.Sprint(pid) {
			return true
		}
	}
	return false
}

// loopDevice attaches img to a free loop device for the test.
func loopDevice(t *testing.T, img string) string {
	t.Helper()
	losetup := testtool.Need(t, "losetup")
	out, err := exec.Command(losetup, "-f", "--show", img).Output()
	if err != nil {
		testtool.Missing(t, "no loop device can be attached here: "+err.Error())
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", dev).Run() })
	return dev
}

// waitsFor runs prog args while hold holds a lock, checks that it blocks
// on the lock (/proc/locks) rather than finishing, then releases the lock
// and checks that it succeeds.
func waitsFor(t *testing.T, what string, release func(), prog string, args ...string) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for !blockedOnLock(t, cmd.Process.Pid) {
		select {
		case err := <-done:
			release()
			t.Fatalf("%s: %s %v finished (%v) without waiting for the lock: %s", what, prog, args, err, stderr.String())
		default:
			runtime.Gosched()
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("%s: %s %v after the lock was released: %v: %s", what, prog, args, err, stderr.String())
	}
}

// TestMetadataLocksExcludeCryptsetup: cryptsetup waits for the lock luksd
// takes, and luksd's readers and editors wait for the lock cryptsetup
// takes (the same flock on the image file, or on /run/cryptsetup/L_M:N for
// a block device), on an image file and on a loop device.
func TestMetadataLocksExcludeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	luksdBin := testtool.Luksd(t)
	base := w.key("base", "base passphrase")
	img := w.image("lock.img")
	w.cs(nil, append(append([]string{"luksFormat", "-q"}, cheapPBKDF("pbkdf2")...), img, base)...).ok(t)
	for _, kind := range []string{"image file", "loop device"} {
		dev := img
		if kind == "loop device" {
			dev = loopDevice(t, img)
		}
		// luksd's lock holds cryptsetup's reader and editor back.
		for _, args := range [][]string{{"luksDump", dev}, {"config", "--label", "cs", dev}} {
			l, err := luks2.LockHeader(dev, true)
			if err != nil {
				t.Fatal(err)
			}
			waitsFor(t, kind+", luksd's lock", func() { l.Unlock() }, w.cryptsetup, args...)
		}
		// cryptsetup's lock, taken as flock(1) takes it on what cryptsetup
		// locks, holds luksd's reader and editor back.
		target := lockTarget(t, dev)
		for _, args := range [][]string{
			{"luksDump", dev},
			{"config", "--label", "luksd", dev},
			{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", base, dev, base},
		} {
			for _, prog := range []string{w.cryptsetup, luksdBin} {
				f, err := os.OpenFile(target, os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
					t.Fatal(err)
				}
				waitsFor(t, kind+", a flock on "+target, func() { f.Close() }, prog, args...)
			}
		}
		// The keyslots the editors added.
		for slot := 1; slot < 8; slot++ {
			w.cs(nil, "luksKillSlot", "-q", dev, fmt.Sprint(slot))
		}
	}
}
