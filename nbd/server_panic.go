package nbd

import (
	"runtime/debug"
	"sync/atomic"
)

// A panic while one request is handled (a bug in a layer below, most
// likely the crypt layer) must neither kill the daemon, which would leave
// /dev/nbdN hung, nor leave the request unanswered. The worker recovers
// it: the request is answered with EIO, one line names the request and the
// panic, the first panic's stack goes to the log (never to the client),
// and the export is marked failed. A failed export refuses every later
// write, write zeroes and trim with EIO, since whatever the panic
// interrupted may have left the layers below in a state nobody checked;
// reads and flushes go on, so the data written before can still be read
// off and made durable. Closing and opening the volume again clears it.

// panicState is the Server's record of panics in request handling.
type panicState struct {
	failed   atomic.Bool
	panics   atomic.Uint64
	stackLog atomic.Bool // the first panic's stack was logged
}

// Failed reports whether a request's handling panicked: the export then
// refuses writes.
func (s *Server) Failed() bool { return s.panics.failed.Load() }

// recoverRequest, deferred by a worker, turns a panic in req's handling
// into an EIO answer and fails the export.
func (ss *session) recoverRequest(req request) {
	v := recover()
	if v == nil {
		return
	}
	s := ss.srv
	s.panics.failed.Store(true)
	if n := s.panics.panics.Add(1); n <= 10 || n%1000 == 0 {
		s.logf("nbd: %s of %d bytes at %d panicked (%d so far): %v; the export has failed: writes fail with EIO until the volume is opened again",
			commandName(req.typ), req.length, req.offset, n, v)
	}
	if s.panics.stackLog.CompareAndSwap(false, true) {
		s.logf("nbd: stack of the first panic:\n%s", debug.Stack())
	}
	ss.reply(req, errIO)
}

// refuseAfterPanic returns errIO for a request that would change data on
// a failed export, else 0.
func (ss *session) refuseAfterPanic() uint32 {
	if ss.srv.Failed() {
		return errIO
	}
	return 0
}
