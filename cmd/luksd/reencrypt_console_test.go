package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
)

// What `reencrypt` says on the console, beside cryptsetup 2.6.1's, each
// tool on its own copy of an image.

// twinImages are copies of img for cryptsetup and luksd.
func (w *workspace) twinImages(img string) (cs, ld string) {
	w.t.Helper()
	cs, ld = w.path("cs-"+strings.TrimPrefix(img, w.dir+"/")), w.path("ld-"+strings.TrimPrefix(img, w.dir+"/"))
	copyFile(w.t, img, cs)
	copyFile(w.t, img, ld)
	return cs, ld
}

// both runs args (with IMG for the tool's copy of img) in both tools and
// returns their results with each copy's name put back to IMG.
func (w *workspace) both(img string, args ...string) (cs, ld result) {
	w.t.Helper()
	csImg, ldImg := w.twinImages(img)
	run := func(prog, copy string) result {
		a := make([]string, len(args))
		for i, s := range args {
			a[i] = strings.ReplaceAll(s, "IMG", copy)
		}
		r := runTool(w.t, nil, prog, a...)
		r.stdout, r.stderr = strings.ReplaceAll(r.stdout, copy, "IMG"), strings.ReplaceAll(r.stderr, copy, "IMG")
		return r
	}
	return run(w.cryptsetup, csImg), run(testtool.Luksd(w.t), ldImg)
}

// startedRun is a reencrypt started in the background, its output kept.
type startedRun struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	out, err bytes.Buffer
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// startRun starts prog and waits until it has printed something on
// standard output (cryptsetup's first progress line, luksd's "Resuming").
func startRun(t *testing.T, prog string, args ...string) *startedRun {
	t.Helper()
	r := &startedRun{cmd: exec.Command(prog, args...)}
	r.cmd.Stdout, r.cmd.Stderr = lockedWriter{&r.mu, &r.out}, lockedWriter{&r.mu, &r.err}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		r.mu.Lock()
		n := r.out.Len()
		r.mu.Unlock()
		if n > 0 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v printed nothing", prog, args)
		}
	}
}

// stop sends sig and returns the run's result.
func (r *startedRun) stop(t *testing.T, sig syscall.Signal) result {
	t.Helper()
	r.cmd.Process.Signal(sig)
	err := r.cmd.Wait()
	res := result{stdout: r.out.String(), stderr: r.err.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	}
	return res
}

// SIGINT stops an offline run as cryptsetup's: the progress line
// cleared, "Reencryption interrupted." and exit 1, the volume left to
// resume.
func TestReencryptInterruptedLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	img := testtool.ImageAt(t, w.dir, "vol.img", 256<<20)
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	csImg, ldImg := w.twinImages(img)
	args := append([]string{"reencrypt", "--force-offline-reencrypt", "--resilience", "journal", "--hotzone-size", "65536", "-d", key}, cheapPBKDF("pbkdf2")...)
	for _, run := range []struct{ prog, img string }{{w.cryptsetup, csImg}, {testtool.Luksd(t), ldImg}} {
		r := startRun(t, run.prog, append(args, run.img)...).stop(t, syscall.SIGINT)
		if r.code != 1 || r.stderr != "\nReencryption interrupted.\n" || !strings.HasSuffix(r.stdout, "\033[2K\r") {
			t.Errorf("%s interrupted: exit %d, stderr %q, stdout ends %q", run.prog, r.code, r.stderr, r.stdout[max(len(r.stdout)-40, 0):])
		}
		if !strings.Contains(w.luksd(nil, "luksDump", run.img).ok(t).stdout, "online-reencrypt") {
			t.Errorf("%s interrupted: the volume is not left in reencryption", run.prog)
		}
		w.luksd(nil, "reencrypt", "--resume-only", "-q", "-d", key, run.img).ok(t)
	}
}

// A second luksd reencrypt of a volume one is reencrypting is told so,
// as beside cryptsetup's, and the first goes on.
func TestReencryptTwiceRefused(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	img := testtool.ImageAt(t, w.dir, "vol.img", 128<<20)
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	first := startRun(t, testtool.Luksd(t), "reencrypt", "--force-offline-reencrypt", "--resilience", "journal", "--hotzone-size", "65536", "-d", key, img)
	w.luksd(nil, "reencrypt", "--resume-only", "-q", "-d", key, img).expect(t, 5, "Reencryption process is already running.")
	if r := first.stop(t, syscall.SIGINT); r.code != 1 || !strings.Contains(r.stderr, "Reencryption interrupted.") {
		t.Fatalf("the first run: exit %d, %q", r.code, r.stderr)
	}
}

func TestReencryptMessagesLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	pb := cheapPBKDF("pbkdf2")
	same := func(what string, cs, ld result) {
		t.Helper()
		if cs != ld {
			t.Errorf("%s:\ncryptsetup: %+v\nluksd:      %+v", what, cs, ld)
		}
	}
	// -v names the keyslots opened and made.
	cs, ld := w.both(img, append([]string{"reencrypt", "-v", "--init-only", "--force-offline-reencrypt", "-d", key, "IMG"}, pb...)...)
	same("-v --init-only", cs, ld)

	// The forced offline mode is announced on a fresh run too, once the
	// passphrase has opened the keys; no 0% report.
	cs, ld = w.both(img, append([]string{"reencrypt", "--progress-json", "--force-offline-reencrypt", "-d", key, "IMG"}, pb...)...)
	for _, r := range []result{cs, ld} {
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Resuming LUKS reencryption in forced offline mode.\n{") || strings.Contains(r.stdout, `"device_bytes":"0"`) {
			t.Errorf("fresh run: exit %d, %q", r.code, r.stdout)
		}
	}
	marked := w.path("marked.img")
	copyFile(t, img, marked)
	w.luksd(nil, append([]string{"reencrypt", "--init-only", "-q", "-d", key, marked}, pb...)...).ok(t)
	wrong := w.key("wrong", "nope")
	cs, ld = w.both(marked, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-d", wrong, "IMG")
	same("resumed with a wrong key file", cs, ld)

	// --encrypt needs a reduction without --header; a small one leaves
	// a small keyslots area, which is said even with -q.
	plain := w.image("plain.img")
	cs, ld = w.both(plain, append([]string{"reencrypt", "-q", "--encrypt", "--reduce-device-size", "0", "--force-offline-reencrypt", "-d", key, "IMG"}, pb...)...)
	same("--encrypt --reduce-device-size 0", cs, ld)
	cs, ld = w.both(plain, append([]string{"reencrypt", "-q", "--encrypt", "--init-only", "--reduce-device-size", "1M", "--force-offline-reencrypt", "-d", key, "IMG"}, pb...)...)
	if !strings.Contains(cs.stdout, "keyslots area (491520 bytes) is very small") {
		t.Fatalf("cryptsetup says %q", cs.stdout)
	}
	same("--encrypt --reduce-device-size 1M", cs, ld)

	cs, ld = w.both(img, "reencrypt", "-q", "--active-name", "x", "--force-offline-reencrypt", "-d", key, "IMG")
	if ld.code != cs.code || !strings.HasSuffix(ld.stderr, "Options --active-name and --force-offline-reencrypt cannot be combined.\n") {
		t.Errorf("--active-name with --force-offline-reencrypt: %+v", ld)
	}

	if help := w.luksd(nil, "--help").stdout; strings.Contains(help, "(offline)") || !strings.Contains(help, "online") {
		t.Errorf("--help on reencrypt:\n%s", help)
	}
}

// On a terminal: the question before resuming a reencryption without
// --resume-only, and --tries for the keyslots' passphrases at init.
func TestTTYReencryptLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	pb := cheapPBKDF("pbkdf2")
	screens := func(t *testing.T, args []string, answers ...[2]string) (cs, ld string) {
		t.Helper()
		var out [2]string
		for i, prog := range []string{w.cryptsetup, testtool.Luksd(t)} {
			copy := w.path("tty.img")
			copyFile(t, img, copy)
			a := make([]string, len(args))
			for j, s := range args {
				a[j] = strings.ReplaceAll(s, "IMG", copy)
			}
			if answers[0][0] == "marked" {
				w.luksd(nil, append([]string{"reencrypt", "--init-only", "-q", "-d", key, copy}, pb...)...).ok(t)
			}
			s := startProgOnTTY(t, prog, a...)
			s.t = t
			count := map[string]int{}
			for _, ans := range answers[1:] {
				count[ans[0]]++
				s.answer(ans[0], count[ans[0]], ans[1])
			}
			code, screen := s.wait()
			out[i] = fmt.Sprintf("%sexit %d", strings.ReplaceAll(screen, copy, "IMG"), code)
		}
		return out[0], out[1]
	}
	t.Run("resume declined", func(t *testing.T) {
		resume := []string{"reencrypt", "--force-offline-reencrypt", "-d", key, "IMG"}
		cs, ld := screens(t, resume, [2]string{"marked"}, [2]string{sureSuffix, "no"})
		if cs != ld || !strings.Contains(ld, "Device IMG is already in LUKS2 reencryption. Do you wish to resume previously initialised operation?") {
			t.Errorf("\ncryptsetup: %q\nluksd:      %q", cs, ld)
		}
	})
	t.Run("tries", func(t *testing.T) {
		tries := append([]string{"reencrypt", "--init-only", "--force-offline-reencrypt", "IMG"}, pb...)
		prompt := "Enter passphrase for key slot 0: "
		cs, ld := screens(t, tries, [2]string{"fresh"}, [2]string{prompt, "a"}, [2]string{prompt, "b"}, [2]string{prompt, "c"})
		if cs != ld || !strings.HasSuffix(ld, "exit 2") {
			t.Errorf("three wrong passphrases:\ncryptsetup: %q\nluksd:      %q", cs, ld)
		}
	})
}

// --active-name NAME reencrypts through the luksd volume NAME, online,
// and only when NAME is active and maps the device.
func TestReencryptActiveName(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[0]
	img, model := reencImage(w, "vol.img", c, keyFile, 24<<20)
	other := testtool.ImageAt(t, w.dir, "other.img", 20<<20)
	w.cs(nil, append([]string{"luksFormat", "-q", other, keyFile}, cheapPBKDF("pbkdf2")...)...).ok(t)
	before, _ := os.ReadFile(other)
	w.luksd(nil, "reencrypt", "-q", "--active-name", "act", "-d", keyFile, other).expect(t, 4, "Device act is not active.")
	spec, key := openSpec(t, img, []byte("pw"), "act", fe.Name())
	done := startDaemon(t, spec, key)
	t.Cleanup(func() { daemon.Close("act") })
	w.luksd(nil, "reencrypt", "-q", "--active-name", "act", "-d", keyFile, other).expect(t, 1, "Mismatching parameters on device act.")
	if after, _ := os.ReadFile(other); !bytes.Equal(before, after) {
		t.Fatal("a refused --active-name changed the device")
	}
	w.luksd(nil, append([]string{"reencrypt", "-q", "--active-name", "act", "--hotzone-size", "262144", "-d", keyFile, img}, c.reencrypt...)...).ok(t)
	if s := w.luksd(nil, "status", "act").ok(t).stdout; !strings.Contains(s, "cipher:  "+c.newCipher) || strings.Contains(s, "reencryption") {
		t.Errorf("status after the reencryption:\n%s", s)
	}
	stopVolume(t, "act", done)
	w.checkData(img, keyFile, c, model)
}
