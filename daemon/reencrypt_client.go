package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The CLI's side of an online reencryption (reencrypt_online.go).

// ReencryptOptions steer an online reencryption; zero values keep what
// the metadata records.
type ReencryptOptions struct {
	HotzoneSize      int64
	Resilience, Hash string
}

// JobError is an online job's failure as the daemon reported it: the
// exit code the engine chose (0: none) and its one line.
type JobError struct {
	Code int
	Msg  string
}

func (e *JobError) Error() string { return e.Msg }

// Reencrypt hands an online reencryption with the keys to name's daemon
// and waits until the job ends (finished, paused or failed); progress,
// when set, is called as it goes. A receive on pause asks the daemon to
// pause the job after its current step (as closing the connection does).
func Reencrypt(name string, oldKey, newKey []byte, opts ReencryptOptions, progress func(done, total int64), pause <-chan struct{}) error {
	if !Alive(name) {
		return errorf(ErrNotActive, "Device %s is not active.", name)
	}
	conn, err := net.DialTimeout("unix", controlPath(name), 5*time.Second)
	if err != nil {
		return fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
	}
	defer conn.Close()
	orUnset := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	cmd := fmt.Sprintf("reencrypt %d %d %d %s %s\n", len(oldKey), len(newKey), opts.HotzoneSize,
		orUnset(opts.Resilience), orUnset(opts.Hash))
	payload := append(append([]byte(cmd), oldKey...), newKey...)
	_, err = conn.Write(payload)
	clear(payload)
	if err != nil {
		return fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-pause:
			conn.(*net.UnixConn).CloseWrite()
		case <-ended:
		}
	}()
	return readJobReplies(bufio.NewReader(conn), progress)
}

// readJobReplies reads "progress DONE TOTAL" lines until the last one.
func readJobReplies(r *bufio.Reader, progress func(done, total int64)) error {
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimSpace(line)
		switch {
		case line == ctlOK:
			return nil
		case strings.HasPrefix(line, "progress "):
			f := strings.Fields(line)
			if len(f) == 3 && progress != nil {
				done, _ := strconv.ParseInt(f[1], 10, 64)
				total, _ := strconv.ParseInt(f[2], 10, 64)
				progress(done, total)
			}
			continue
		case strings.HasPrefix(line, "error "):
			code, msg, _ := strings.Cut(strings.TrimPrefix(line, "error "), ": ")
			n, _ := strconv.Atoi(code)
			return &JobError{Code: n, Msg: msg}
		case strings.HasPrefix(line, "error: "):
			return &JobError{Msg: strings.TrimPrefix(line, "error: ")}
		case err != nil:
			return errors.New("the daemon hung up during the reencryption")
		}
		return fmt.Errorf("unexpected reply %q", line)
	}
}

// jobReply is the daemon's last line for a job that failed with err: its
// exit code, when the engine gave one (an error with ExitCode), and line.
func jobReply(err error) string {
	code := 0
	var coded interface{ ExitCode() int }
	switch {
	case errors.As(err, &coded):
		code = coded.ExitCode()
	case errors.Is(err, ErrBusy):
		code = 5
	}
	return fmt.Sprintf("error %d: %s", code, oneLine(err))
}
