package daemontest

import "github.com/luksd/luksd/daemon/frontend"

var _ frontend.Failer = (*Attachment)(nil)

// Failed reports whether Fail was called, as a frontend whose request
// handling panicked reports it.
func (a *Attachment) Failed() bool { return a.failed.Load() }

// Fail makes the attachment report that it failed.
func (a *Attachment) Fail() { a.failed.Store(true) }
