package nbd

import (
	"sync/atomic"
	"time"
)

// With Config.RequestTimeout set, a request the device has not carried out
// in that time is answered with EIO, and the device stays: a stalled
// backend makes requests fail instead of hanging for ever, as the Linux
// NBD client's own timeout would (it drops the connection and sends the
// request again, on and on). The device operation cannot be cancelled: it
// goes on in its worker, holding its buffer and budget until it returns,
// and its result is dropped. A write that timed out may so still reach the
// disk later.

// answer decides who replies to a request: its worker or its timeout,
// whichever comes first. A nil answer (no timeout) lets the worker reply.
type answer struct{ taken atomic.Bool }

// newAnswer returns an answer for a request when requests time out.
func (ss *session) newAnswer() *answer {
	if ss.srv.cfg.RequestTimeout <= 0 {
		return nil
	}
	return &answer{}
}

// claim reports whether the caller is the one to reply.
func (a *answer) claim() bool { return a == nil || a.taken.CompareAndSwap(false, true) }

// armTimeout starts req's timeout, if it has one, and returns what stops
// it once the request is carried out.
func (ss *session) armTimeout(req request) (stop func()) {
	if req.answer == nil {
		return func() {}
	}
	t := time.AfterFunc(ss.srv.cfg.RequestTimeout, func() {
		if !req.answer.claim() {
			return
		}
		ss.srv.logTimeout(req)
		ss.replyTimedOut(req)
	})
	return func() { t.Stop() }
}

// replyTimedOut answers req with EIO; the caller has claimed it.
func (ss *session) replyTimedOut(req request) {
	req.answer = nil // claimed already
	ss.reply(req, errIO)
}

// logTimeout logs a timed-out request, rate-limited as backend failures.
func (s *Server) logTimeout(req request) {
	if req.typ == cmdFlush { // as a failed flush: see flushFailure
		n := s.ioErrors.Add(1)
		s.durability.Printf("nbd: flush not done after %v: answered EIO (%d failures so far), acknowledged writes may not be durable",
			s.cfg.RequestTimeout, n)
		return
	}
	if n := s.ioErrors.Add(1); n <= 10 || n%1000 == 0 {
		s.logf("nbd: %s of %d bytes at %d not done after %v: answered EIO (%d failures so far)",
			commandName(req.typ), req.length, req.offset, s.cfg.RequestTimeout, n)
	}
}
