package daemontest

import "github.com/luksd/luksd/daemon/frontend"

var _ frontend.DiscardSwitch = (*Attachment)(nil)

// SetDiscards records the kernel side's discard setting.
func (a *Attachment) SetDiscards(on bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.discards = append(a.discards, on)
	return nil
}

// Discards returns the discard settings the kernel side was given, in
// order.
func (a *Attachment) Discards() []bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]bool(nil), a.discards...)
}
