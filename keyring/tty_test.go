package keyring

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/internal/testtool"
)

// openPTY returns a pseudo-terminal's master and slave ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, s := testtool.OpenPTY(t)
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// screen collects what the terminal shows.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func watch(m *os.File) *screen {
	sc := &screen{}
	go func() {
		b := make([]byte, 256)
		for {
			n, err := m.Read(b)
			sc.mu.Lock()
			sc.buf.Write(b[:n])
			sc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return sc
}

// waitFor waits until the screen shows want count times.
func (s *screen) waitFor(t *testing.T, want string, count int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(s.String(), want) < count {
		if time.Now().After(deadline) {
			t.Fatalf("terminal never showed %q (%d times); it shows %q", want, count, s.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type result struct {
	pass []byte
	err  error
}

func askOn(slave *os.File, prompt string, verify bool) chan result {
	ch := make(chan result, 1)
	go func() {
		k, err := Source{Stdin: slave}.Passphrase(prompt, verify)
		r := result{err: err}
		if err == nil {
			r.pass = append([]byte(nil), k.Bytes()...)
			k.Wipe()
		}
		ch <- r
	}()
	return ch
}

func TestTerminalPromptWithoutEcho(t *testing.T) {
	m, s := openPTY(t)
	sc := watch(m)
	if !(Source{Stdin: s}).Interactive() {
		t.Fatal("a pty is interactive")
	}
	ch := askOn(s, "Enter passphrase for img: ", true)
	sc.waitFor(t, "Enter passphrase for img: ", 1)
	m.WriteString("s3cret pass\n")
	sc.waitFor(t, "Verify passphrase: ", 1)
	m.WriteString("s3cret pass\n")
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(r.pass) != "s3cret pass" {
		t.Fatalf("passphrase %q", r.pass)
	}
	sc.waitFor(t, "\n", 2)
	if strings.Contains(sc.String(), "s3cret") {
		t.Fatalf("passphrase echoed: %q", sc.String())
	}
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO == 0 {
		t.Fatal("echo not restored after the prompt")
	}
}

func TestTerminalVerifyMismatch(t *testing.T) {
	m, s := openPTY(t)
	sc := watch(m)
	ch := askOn(s, "New: ", true)
	sc.waitFor(t, "New: ", 1)
	m.WriteString("one\n")
	sc.waitFor(t, "Verify passphrase: ", 1)
	m.WriteString("two\n")
	if r := <-ch; !errors.Is(r.err, ErrMismatch) || r.err.Error() != "Passphrases do not match." {
		t.Fatalf("err = %v, want ErrMismatch", r.err)
	}
}

func TestTerminalIgnoresKeyFileOptionsOnlyForStdin(t *testing.T) {
	// --key-file - on a terminal prompts like cryptsetup does.
	m, s := openPTY(t)
	sc := watch(m)
	ch := make(chan result, 1)
	go func() {
		k, err := Source{KeyFile: "-", Stdin: s}.Passphrase("P: ", false)
		r := result{err: err}
		if err == nil {
			r.pass = append([]byte(nil), k.Bytes()...)
			k.Wipe()
		}
		ch <- r
	}()
	sc.waitFor(t, "P: ", 1)
	m.WriteString("abc\n")
	if r := <-ch; r.err != nil || string(r.pass) != "abc" {
		t.Fatalf("got %q, %v", r.pass, r.err)
	}
}
