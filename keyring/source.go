package keyring

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxKeyFileSize is cryptsetup's default limit on a key file read without
// --keyfile-size (DEFAULT_KEYFILE_SIZE_MAXKB, 8 MiB).
const MaxKeyFileSize = 8 << 20

// A Message is an error whose text is cryptsetup's message, word for word:
// capitalised and ending with a full stop, unlike a Go error string,
// because the CLI prints it as it is and scripts match it.
type Message string

func (m Message) Error() string { return string(m) }

// readError is a failed read or write of a passphrase: cryptsetup's words
// for what failed, then why.
type readError struct {
	what Message
	err  error
}

func (e *readError) Error() string { return string(e.what) + ": " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

const (
	// ErrMismatch: the passphrase and its verification differ (cryptsetup exit 2).
	ErrMismatch Message = "Passphrases do not match."
	// ErrNoInput: the source was empty.
	ErrNoInput Message = "Nothing to read on input."
	// ErrTimeout: no passphrase was typed within --timeout (cryptsetup
	// says no more than that, exit 1).
	ErrTimeout Message = "Error reading passphrase from terminal."

	errOpen     Message = "Failed to open key file."
	errSeek     Message = "Cannot seek to requested keyfile offset."
	errShort    Message = "Cannot read requested amount of data."
	errNegative Message = "Negative keyfile offset or size."
	errTooLarge Message = "Maximum keyfile size exceeded."
	errReading  Message = "Error reading passphrase"
	errTerminal Message = "Error reading passphrase from terminal"
	errPrompt   Message = "Error writing prompt"
)

// Source describes where a passphrase comes from, with cryptsetup's rules:
// a key file (--key-file, "-" meaning standard input) read whole, or
// Size bytes after Offset; else the terminal, without echo; else a line
// of standard input. Passphrases never come from argv or the environment.
type Source struct {
	KeyFile string // --key-file; "" or "-" = standard input
	Offset  int64  // --keyfile-offset
	Size    int64  // --keyfile-size; 0 = whole file up to MaxKeyFileSize

	// Timeout bounds each prompt on a terminal (--timeout); 0 waits
	// for ever.
	Timeout time.Duration

	// Fetch, when set, supplies the passphrase instead (a key server,
	// --key-source); the other fields are not used.
	Fetch func() (*Secret, error)

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
	return s.Fetch == nil && s.fromStdin() && isTerminal(s.stdin())
}

// Passphrase reads a passphrase. On a terminal it prints prompt, reads
// without echo and, when verify is set, asks again ("Verify passphrase: ")
// and returns ErrMismatch when the two differ. The caller wipes the result.
func (s Source) Passphrase(prompt string, verify bool) (*Secret, error) {
	if s.Fetch != nil {
		return s.Fetch()
	}
	if s.Interactive() {
		return s.fromTerminal(prompt, verify)
	}
	if s.KeyFile == "" {
		// Piped passphrase without --key-file: one line, newline dropped.
		return s.read(s.stdin(), true)
	}
	if s.KeyFile == "-" {
		return s.read(s.stdin(), false)
	}
	f, err := os.Open(s.KeyFile)
	if err != nil {
		return nil, errOpen
	}
	defer f.Close()
	return s.read(f, false)
}

// read applies --keyfile-offset and --keyfile-size to f, as cryptsetup's
// keyfile reader does: line stops at a newline (piped passphrases); an
// empty read is an empty passphrase from a key file named by path, but
// "Nothing to read on input." from standard input, even when that is a
// redirected regular file.
func (s Source) read(f *os.File, line bool) (*Secret, error) {
	if s.Offset < 0 || s.Size < 0 {
		return nil, errNegative
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, &readError{errReading, err}
	}
	regular := fi.Mode().IsRegular()
	if s.Offset > 0 {
		if regular {
			if s.Offset > fi.Size() {
				return nil, errSeek
			}
			if _, err := f.Seek(s.Offset, io.SeekCurrent); err != nil {
				return nil, errSeek
			}
		} else if n, _ := io.CopyN(io.Discard, f, s.Offset); n != s.Offset {
			return nil, errSeek
		}
	}
	exact, limit := s.Size, int64(MaxKeyFileSize)
	if exact > 0 {
		limit = exact
	}
	k, newline, err := readLimited(f, exact, limit, line)
	if err != nil {
		return nil, err
	}
	if exact > 0 && int64(k.Len()) != exact {
		k.Wipe()
		return nil, errShort
	}
	if k.Len() == 0 && !newline && !(regular && !s.fromStdin()) {
		k.Wipe()
		return nil, ErrNoInput
	}
	return k, nil
}

// readLimited reads r into a Secret: exactly exact bytes when exact > 0
// (fewer at end of input; the caller checks), else to end of input,
// failing when more than limit bytes come. With line, reading stops at a
// newline, which is dropped and reported.
func readLimited(r io.Reader, exact, limit int64, line bool) (k *Secret, newline bool, err error) {
	capacity := 4096
	if exact > 0 {
		capacity = int(exact)
	}
	if k, err = NewSecret(capacity); err != nil {
		return nil, false, err
	}
	n := 0
	buf := k.mem
	for exact == 0 || int64(n) < exact {
		if n == len(buf) {
			if k, err = k.grow(2 * n); err != nil {
				return nil, false, err
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
			return nil, false, errTooLarge
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			k.Wipe()
			return nil, false, &readError{errReading, rerr}
		}
	}
	k.truncate(n)
	return k, newline, nil
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
	k, err := readNoEcho(in, out, prompt, s.Timeout)
	if err != nil {
		return nil, err
	}
	if !verify {
		return k, nil
	}
	k2, err := readNoEcho(in, out, "Verify passphrase: ", s.Timeout)
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
// With a timeout, a line not ended in time is ErrTimeout.
func readNoEcho(tty *os.File, out io.Writer, prompt string, timeout time.Duration) (*Secret, error) {
	fd := int(tty.Fd())
	orig, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, &readError{errTerminal, err}
	}
	// Catch the signals before echo goes off: a ^C typed the moment the
	// prompt appears must still find the handler that restores the terminal.
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
	defer func() {
		close(done)
		signal.Stop(sigs)
	}()
	noEcho := *orig
	noEcho.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL
	noEcho.Lflag |= unix.ICANON
	// TCSETSF: like TCSAFLUSH, drop input typed before the prompt.
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, &noEcho); err != nil {
		return nil, &readError{errTerminal, err}
	}
	// Prompt only once echo is off, so nothing typed after it is echoed.
	if _, err := io.WriteString(out, prompt); err != nil {
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, orig)
		return nil, &readError{errPrompt, err}
	}
	var r io.Reader = tty
	if timeout > 0 {
		r = &deadlineReader{f: tty, deadline: time.Now().Add(timeout)}
	}
	k, newline, rerr := readLimited(r, 0, MaxKeyFileSize, true)
	if rerr == nil && k.Len() == 0 && !newline {
		k.Wipe()
		rerr = ErrNoInput // end of input (^D) at the prompt
	}
	_ = unix.IoctlSetTermios(fd, unix.TCSETS, orig)
	if errors.Is(rerr, ErrTimeout) {
		// cryptsetup's message follows the prompt on its line.
		return nil, ErrTimeout
	}
	io.WriteString(out, "\n")
	if rerr != nil {
		return nil, rerr
	}
	return k, nil
}

// deadlineReader reads f until a deadline, then fails with ErrTimeout:
// it waits for input with poll, so a terminal nobody types on does not
// hold the read past it.
type deadlineReader struct {
	f        *os.File
	deadline time.Time
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	for {
		left := time.Until(d.deadline)
		if left <= 0 {
			return 0, ErrTimeout
		}
		fds := []unix.PollFd{{Fd: int32(d.f.Fd()), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return d.f.Read(p)
		}
	}
}
