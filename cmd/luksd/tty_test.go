package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
	"golang.org/x/sys/unix"
)

// ttySession runs luksd on a pseudo-terminal, as a user at a console.
type ttySession struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	screen bytes.Buffer
	done   chan struct{}
}

func startOnTTY(t *testing.T, args ...string) *ttySession {
	t.Helper()
	return startProgOnTTY(t, testtool.Luksd(t), args...)
}

// startProgOnTTY runs prog (luksd, or cryptsetup to compare with) on a
// pseudo-terminal.
func startProgOnTTY(t *testing.T, prog string, args ...string) *ttySession {
	t.Helper()
	m, slave := testtool.OpenPTY(t)
	cmd := exec.Command(prog, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	s := &ttySession{t: t, master: m, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 512)
		for {
			n, err := m.Read(b)
			s.mu.Lock()
			s.screen.Write(b[:n])
			s.mu.Unlock()
			if err != nil { // EIO once luksd has exited
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		m.Close()
	})
	return s
}

func (s *ttySession) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.screen.String()
}

// expect waits until the screen shows want for the count-th time.
func (s *ttySession) expect(want string, count int) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(s.String(), want) < count {
		if time.Now().After(deadline) {
			s.t.Fatalf("terminal never showed %q; it shows %q", want, s.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answer waits for prompt (its count-th appearance) and types line.
func (s *ttySession) answer(prompt string, count int, line string) {
	s.t.Helper()
	s.expect(prompt, count)
	if _, err := s.master.WriteString(line + "\n"); err != nil {
		s.t.Fatal(err)
	}
}

// wait returns luksd's exit code and everything the terminal showed.
func (s *ttySession) wait() (int, string) {
	s.t.Helper()
	err := s.cmd.Wait()
	<-s.done
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	out := s.String()
	if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
		s.t.Fatalf("stack trace on the terminal:\n%s", out)
	}
	return code, out
}

const sureSuffix = "Are you sure? (Type 'yes' in capital letters): "

func TestTTYFormatPromptsWithoutEcho(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("vol.img")
	s := startOnTTY(t, append([]string{"luksFormat", img}, cheapPBKDF("pbkdf2")...)...)
	s.answer("\r\nWARNING!\r\n========\r\nThis will overwrite data on "+img+" irrevocably.\r\n\r\n"+sureSuffix, 1, "YES")
	s.answer("Enter passphrase for "+img+": ", 1, "typed at a tty")
	s.answer("Verify passphrase: ", 1, "typed at a tty")
	code, screen := s.wait()
	if code != 0 {
		t.Fatalf("luksFormat on a tty: exit %d:\n%s", code, screen)
	}
	if strings.Contains(screen, "typed at a tty") {
		t.Fatalf("the passphrase was echoed:\n%q", screen)
	}
	if !w.opens(img, w.key("key", "typed at a tty")) {
		t.Fatal("cryptsetup does not accept the passphrase typed on the terminal")
	}

	// Formatting over it warns about the existing header; "no" aborts.
	s = startOnTTY(t, "luksFormat", img)
	s.answer(sureSuffix, 1, "no")
	code, screen = s.wait()
	if code != 1 || !strings.Contains(screen, "Operation aborted.") ||
		!strings.Contains(screen, "WARNING: Device "+img+" already contains a 'crypto_LUKS' superblock signature.") {
		t.Fatalf("declined luksFormat: exit %d:\n%s", code, screen)
	}
	if !w.opens(img, w.key("key", "typed at a tty")) {
		t.Fatal("a declined luksFormat changed the volume")
	}
}

func TestTTYVerifyMismatchAndTries(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("vol.img")
	s := startOnTTY(t, append([]string{"luksFormat", "-q", img}, cheapPBKDF("pbkdf2")...)...)
	s.answer("Enter passphrase for "+img+": ", 1, "one")
	s.answer("Verify passphrase: ", 1, "two")
	if code, screen := s.wait(); code != 2 || !strings.Contains(screen, "Passphrases do not match.") {
		t.Fatalf("mismatch: exit %d:\n%s", code, screen)
	}
	if w.luksd(nil, "isLuks", img).code != 1 {
		t.Fatal("a failed luksFormat wrote a header")
	}

	key := w.key("key", "right")
	w.luksd(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	// open may retype a wrong passphrase on a terminal (--tries, default 3).
	prompt := "Enter passphrase for " + img + ": "
	s = startOnTTY(t, "open", "--test-passphrase", img)
	s.answer(prompt, 1, "wrong")
	s.answer(prompt, 2, "right")
	code, screen := s.wait()
	if code != 0 || strings.Count(screen, "No key available with this passphrase.") != 1 {
		t.Fatalf("retry: exit %d:\n%s", code, screen)
	}
	// luksDump asks once, as cryptsetup's.
	s = startOnTTY(t, "luksDump", "--dump-volume-key", "-q", img)
	s.answer(prompt, 1, "wrong")
	code, screen = s.wait()
	if code != 2 || strings.Count(screen, prompt) != 1 {
		t.Fatalf("luksDump with a wrong passphrase: exit %d:\n%s", code, screen)
	}
	s = startOnTTY(t, "open", "--test-passphrase", "--tries", "2", img)
	s.answer(prompt, 1, "wrong")
	s.answer(prompt, 2, "still wrong")
	code, screen = s.wait()
	if code != 2 || strings.Count(screen, prompt) != 2 {
		t.Fatalf("--tries 2: exit %d:\n%s", code, screen)
	}
}

func TestTTYAddKeyPrompts(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.image("vol.img"), w.key("key", "old")
	w.cs(nil, append([]string{"luksFormat", "-q", img, key}, cheapPBKDF("pbkdf2")...)...).ok(t)
	s := startOnTTY(t, append([]string{"luksAddKey", img}, cheapPBKDF("pbkdf2")...)...)
	s.answer("Enter any existing passphrase: ", 1, "old")
	s.answer("Enter new passphrase for key slot: ", 1, "new one")
	s.answer("Verify passphrase: ", 1, "new one")
	code, screen := s.wait()
	if code != 0 || strings.Contains(screen, "new one") || strings.Contains(screen, "old\r") {
		t.Fatalf("luksAddKey on a tty: exit %d:\n%q", code, screen)
	}
	if !w.opens(img, w.key("new", "new one")) {
		t.Fatal("cryptsetup does not accept the added passphrase")
	}

	s = startOnTTY(t, append([]string{"luksChangeKey", img}, cheapPBKDF("pbkdf2")...)...)
	s.answer("Enter passphrase to be changed: ", 1, "new one")
	s.answer("Enter new passphrase: ", 1, "s3cr3t-2")
	s.answer("Verify passphrase: ", 1, "s3cr3t-2")
	if code, screen := s.wait(); code != 0 || strings.Contains(screen, "s3cr3t") {
		t.Fatalf("luksChangeKey on a tty: exit %d:\n%q", code, screen)
	}
	if w.opens(img, w.key("new", "new one")) || !w.opens(img, w.key("changed", "s3cr3t-2")) {
		t.Fatal("luksChangeKey on a tty did not replace the passphrase")
	}

	s = startOnTTY(t, "luksKillSlot", img, "1")
	s.answer("Enter any remaining passphrase: ", 1, "old")
	if code, screen := s.wait(); code != 0 {
		t.Fatalf("luksKillSlot on a tty: exit %d:\n%q", code, screen)
	}
	s = startOnTTY(t, "luksRemoveKey", img)
	s.answer("Enter passphrase to be deleted: ", 1, "old")
	s.answer("This is the last keyslot. Device will become unusable after purging this key.\r\n\r\n"+sureSuffix, 1, "YES")
	if code, screen := s.wait(); code != 0 {
		t.Fatalf("luksRemoveKey on a tty: exit %d:\n%q", code, screen)
	}
	if dump := w.cs(nil, "luksDump", img).ok(t).stdout; strings.Contains(dump, ": luks2") {
		t.Fatalf("a keyslot is still there:\n%s", dump)
	}
}

func TestTTYDialogsDeclined(t *testing.T) {
	w := newWorkspace(t)
	img, _ := w.formatted("pbkdf2")
	backup := w.path("hdr")
	w.cs(nil, "luksHeaderBackup", img, "--header-backup-file", backup).ok(t)
	before, _ := os.ReadFile(img)
	for _, c := range []struct {
		args    []string
		warning string
		code    int
		message string
	}{
		{[]string{"luksKillSlot", img, "0"}, "This is the last keyslot. Device will become unusable after purging this key.", 2, "Operation aborted, the keyslot was NOT wiped."},
		{[]string{"luksUUID", img, "--uuid", "12345678-9abc-def0-1234-56789abcdef0"}, "Do you really want to change UUID of device?", 2, "Operation aborted."},
		{[]string{"luksHeaderRestore", img, "--header-backup-file", backup}, "Device " + img + " already contains LUKS2 header. Replacing header will destroy existing keyslots.", 1, ""},
		{[]string{"erase", img}, "This operation will erase all keyslots on device " + img + ".\r\nDevice will become unusable after this operation.", 2, "Operation aborted, keyslots were NOT wiped."},
		{[]string{"luksDump", "--dump-volume-key", img}, "The header dump with volume key is sensitive information\r\nthat allows access", 2, ""},
	} {
		s := startOnTTY(t, c.args...)
		s.answer("\r\nWARNING!\r\n========\r\n"+c.warning, 1, "no")
		code, screen := s.wait()
		if code != c.code || !strings.Contains(screen, sureSuffix) || !strings.Contains(screen, c.message) {
			t.Errorf("%v declined: exit %d, want %d and %q:\n%s", c.args[0], code, c.code, c.message, screen)
		}
		if strings.Contains(screen, "Enter") {
			t.Errorf("%v asked for a passphrase after the dialog was declined:\n%s", c.args[0], screen)
		}
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("a declined dialog changed the image")
	}
}

func TestTTYInterruptRestoresEcho(t *testing.T) {
	w := newWorkspace(t)
	img, _ := w.formatted("pbkdf2")
	s := startOnTTY(t, "luksDump", "--dump-volume-key", "-q", img)
	s.expect("Enter passphrase for "+img+": ", 1)
	// Echo is off while luksd waits (the pty's settings are shared by
	// both ends).
	tio, err := unix.IoctlGetTermios(int(s.master.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO != 0 {
		t.Fatal("echo is on at the passphrase prompt")
	}
	s.master.Write([]byte{tio.Cc[unix.VINTR]}) // ^C
	err = s.cmd.Wait()
	<-s.done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Fatalf("luksd after ^C: %v, want death by SIGINT", err)
	}
	if tio, err = unix.IoctlGetTermios(int(s.master.Fd()), unix.TCGETS); err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO == 0 {
		t.Fatal("^C at the prompt left the terminal without echo")
	}
}

// --timeout bounds a terminal prompt as in cryptsetup: nothing typed in
// time is "Error reading passphrase from terminal." after the prompt,
// exit 1, the same screen as cryptsetup's; a passphrase typed in time
// opens.
func TestTTYPromptTimeout(t *testing.T) {
	w := newWorkspace(t)
	img := w.image("timeout.img")
	testtool.CryptsetupFormat(t, img, w.key("zero", "zero"))
	twin := w.path("twin.img")
	copyFile(t, img, twin)
	args := func(dev string) []string { return []string{"open", "--test-passphrase", "-v", "--timeout", "1", dev} }
	cs := startProgOnTTY(t, w.cryptsetup, args(twin)...)
	csCode, csScreen := cs.wait()
	ld := startOnTTY(t, args(img)...)
	ldCode, ldScreen := ld.wait()
	if ldCode != 1 || ldCode != csCode || strings.ReplaceAll(ldScreen, img, "IMG") != strings.ReplaceAll(csScreen, twin, "IMG") {
		t.Fatalf("timeout: cryptsetup exit %d %q, luksd exit %d %q", csCode, csScreen, ldCode, ldScreen)
	}
	s := startOnTTY(t, "open", "--test-passphrase", "-v", "--timeout", "30", img)
	s.answer("Enter passphrase for "+img+": ", 1, "zero")
	if code, screen := s.wait(); code != 0 || !strings.Contains(screen, "Key slot 0 unlocked.") {
		t.Fatalf("typed in time: exit %d, screen %q", code, screen)
	}
}
