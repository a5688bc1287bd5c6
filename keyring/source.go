package keyring

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxKeyFileSize is cryptsetup's default limit on a key file read without
// --keyfile-size (DEFAULT_KEYFILE_SIZE_MAXKB, 8 MiB).
const MaxKeyFileSize = 8 << 20

var (
	// ErrMismatch: the passphrase and its verification differ (cryptsetup exit 2).
	ErrMismatch = errors.New("Passphrases do not match.")
	// ErrNoInput: the source was empty.
	ErrNoInput = errors.New("Nothing to read on input.")
)

// Source describes where a passphrase comes from, with cryptsetup's rules:
// a key file (--key-file, "-" meaning standard input) read whole, or
// Size bytes after Offset; else the terminal, without echo; else a line
// of standard input. Passphrases never come from argv or the environment.
type Source struct {
	KeyFile string // --key-file; "" or "-" = standard input
	Offset  int64  // --keyfile-offset
	Size    int64  // --keyfile-size; 0 = whole file up to MaxKeyFileSize

	// Stdin is standard input; nil means os.Stdin.
	Stdin *os.File
	// Stderr receives prompts when the terminal cannot be written; nil
	// means os.Stderr.
	Stderr io.Writer
}

func (s Source) stdin() *os.File {
	if s.Stdin != nil {
		return s.Stdin
	}
	return os.Stdin
}

func (s Source) stderr() io.Writer {
	if s.Stderr != nil {
		return s.Stderr
	}
	return os.Stderr
}

func (s Source) fromStdin() bool { return s.KeyFile == "" || s.KeyFile == "-" }

// Interactive reports whether Passphrase would prompt on a terminal, the
// only case where retrying a wrong passphrase makes sense (--tries).
func (s Source) Interactive() bool {
	return s.fromStdin() && isTerminal(s.stdin())
}

// Passphrase reads a passphrase. On a terminal it prints prompt, reads
// without echo and, when verify is set, asks again ("Verify passphrase: ")
// and returns ErrMismatch when the two differ. The caller wipes the result.
func (s Source) Passphrase(prompt string, verify bool) (*Secret, error) {
	if s.Interactive() {
		return s.fromTerminal(prompt, verify)
	}
	if s.fromStdin() && s.KeyFile == "" {
		// Piped passphrase without --key-file: one line, newline dropped.
		return readLimited(s.stdin(), 0, MaxKeyFileSize, true)
	}
	if s.KeyFile == "-" {
		return s.readKeyFile(s.stdin())
	}
	f, err := os.Open(s.KeyFile)
	if err != nil {
		return nil, errors.New("Failed to open key file.")
	}
	defer f.Close()
	return s.readKeyFile(f)
}

// readKeyFile applies --keyfile-offset and --keyfile-size to r.
func (s Source) readKeyFile(f *os.File) (*Secret, error) {
	if s.Offset < 0 || s.Size < 0 {
		return nil, errors.New("Negative keyfile offset or size.")
	}
	if s.Offset > 0 {
		if _, err := f.Seek(s.Offset, io.SeekStart); err != nil {
			// Pipes cannot seek: read and discard instead.
			if _, err := io.CopyN(io.Discard, f, s.Offset); err != nil {
				return nil, errors.New("Cannot seek to requested keyfile offset.")
			}
		}
	}
	if s.Size > 0 {
		k, err := readLimited(f, s.Size, s.Size, false)
		if err != nil {
			return nil, err
		}
		if int64(k.Len()) != s.Size {
			k.Wipe()
			return nil, errors.New("Cannot read requested amount of data.")
		}
		return k, nil
	}
	return readLimited(f, 0, MaxKeyFileSize, false)
}

// readLimited reads r into a Secret: up to limit bytes when exact > 0
// (the caller checks the count), else to end of input (or the first
// newline when line is set), failing when more than limit bytes remain.
func readLimited(r io.Reader, exact, limit int64, line bool) (*Secret, error) {
	capacity := 4096
	if exact > 0 {
		capacity = int(exact)
	}
	k, err := NewSecret(capacity)
	if err != nil {
		return nil, err
	}
	n := 0
	buf := k.mem
	newline := false
	for exact == 0 || int64(n) < exact {
		if n == len(buf) {
			if k, err = k.grow(2 * n); err != nil {
				return nil, err
			}
			buf = k.mem
		}
		end := int64(len(buf))
		switch {
		case line:
			// Bytewise, so nothing past the newline is consumed.
			end = int64(n) + 1
		case exact > 0:
			end = min(end, exact)
		default:
			end = min(end, limit+1) // one byte past the limit detects overflow
		}
		m, rerr := r.Read(buf[n:end])
		if line && m == 1 && buf[n] == '\n' {
			buf[n] = 0
			newline = true
			break
		}
		n += m
		if exact == 0 && int64(n) > limit {
			k.Wipe()
			return nil, errors.New("Maximum keyfile size exceeded.")
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			k.Wipe()
			return nil, fmt.Errorf("Error reading passphrase: %v", rerr)
		}
	}
	k.truncate(n)
	if n == 0 && !newline {
		k.Wipe()
		return nil, ErrNoInput
	}
	return k, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// fromTerminal prompts on the terminal behind standard input.
func (s Source) fromTerminal(prompt string, verify bool) (*Secret, error) {
	in := s.stdin()
	var out io.Writer = in
	if fl, err := unix.FcntlInt(in.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE == unix.O_RDONLY {
		out = s.stderr()
	}
	k, err := readNoEcho(in, out, prompt)
	if err != nil {
		return nil, err
	}
	if !verify {
		return k, nil
	}
	k2, err := readNoEcho(in, out, "Verify passphrase: ")
	if err != nil {
		k.Wipe()
		return nil, err
	}
	defer k2.Wipe()
	if !k.Equal(k2) {
		k.Wipe()
		return nil, ErrMismatch
	}
	return k, nil
}

// readNoEcho prints prompt, turns echo off on tty, reads one line and
// restores the terminal, also when a signal ends the process meanwhile.
func readNoEcho(tty *os.File, out io.Writer, prompt string) (*Secret, error) {
	fd := int(tty.Fd())
	orig, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("Error reading passphrase from terminal: %v", err)
	}
	noEcho := *orig
	noEcho.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL
	noEcho.Lflag |= unix.ICANON
	// TCSETSF: like TCSAFLUSH, drop input typed before the prompt.
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, &noEcho); err != nil {
		return nil, fmt.Errorf("Error reading passphrase from terminal: %v", err)
	}
	// Prompt only once echo is off, so nothing typed after it is echoed.
	if _, err := io.WriteString(out, prompt); err != nil {
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, orig)
		return nil, fmt.Errorf("Error writing prompt: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		select {
		case sig := <-sigs:
			_ = unix.IoctlSetTermios(fd, unix.TCSETS, orig)
			signal.Reset(sig)
			_ = unix.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	k, rerr := readLimited(tty, 0, MaxKeyFileSize, true)
	close(done)
	signal.Stop(sigs)
	_ = unix.IoctlSetTermios(fd, unix.TCSETS, orig)
	io.WriteString(out, "\n")
	if rerr != nil {
		return nil, rerr
	}
	return k, nil
}
