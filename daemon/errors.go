package daemon

import (
	"errors"
	"fmt"
	"strings"
)

// The kinds of the daemon's failures: errors.Is(err, ErrBusy) and so on
// tell them apart, and the CLI maps each to cryptsetup's exit code. The
// error's text is cryptsetup's words where cryptsetup has them, since the
// daemon's log and the parent's message say the same.
var (
	ErrInvalid   = errors.New("invalid")    // a bad name, cipher or spec
	ErrExists    = errors.New("exists")     // the name is active already
	ErrBusy      = errors.New("busy")       // in use, or being activated or deactivated
	ErrNotActive = errors.New("not active") // no daemon runs the name
	ErrNoDevice  = errors.New("no device")  // the data device cannot be opened
)

// Error is a failure of one of the kinds above.
type Error struct {
	Kind error
	Msg  string
	Err  error // the cause, when there is one (a blockdev.ClaimError ...)
}

func (e *Error) Error() string        { return e.Msg }
func (e *Error) Unwrap() error        { return e.Err }
func (e *Error) Is(target error) bool { return target == e.Kind }

func errorf(kind error, format string, a ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// InUse is cryptsetup's refusal of a data device someone else holds;
// cause (a blockdev.ClaimError, or nil) says what holds it, for the log.
// A remote volume's holder, which no local tool can show (an S3 lease:
// a host and process elsewhere), is named in a second sentence, with how
// to break its hold where that is the user's to do.
func InUse(path string, cause error) error {
	msg := fmt.Sprintf("Cannot use device %s which is in use (already mapped or mounted).", path)
	var h interface{ Holder() string }
	if errors.As(cause, &h) {
		msg += " " + h.Holder()
	}
	return &Error{Kind: ErrBusy, Msg: msg, Err: cause}
}

// StartError is a daemon's failure before its device was ready with the
// exit code its CLI chose, as a spawned daemon reported it; or one whose
// code no kind above gives, as openCrypt makes it (Err the cause).
type StartError struct {
	Code int
	Msg  string
	Err  error
}

func (e *StartError) Error() string { return e.Msg }
func (e *StartError) Unwrap() error { return e.Err }

// ErrReported is RunChild's failure once it has told the parent why over
// the ready pipe: there is nothing more to say.
var ErrReported = errors.New("reported to the parent")

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
