package daemontest

import "github.com/luksd/luksd/daemon/frontend"

var _ frontend.Resizer = (*Attachment)(nil)

// Resize records the kernel's new size, or fails as FailResize said.
func (a *Attachment) Resize(old, size int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.resizeErr != nil {
		return a.resizeErr
	}
	a.sizes = append(a.sizes, size)
	return nil
}

// Sizes returns the sizes the kernel side was told, in order.
func (a *Attachment) Sizes() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int64(nil), a.sizes...)
}

// FailResize makes Resize fail with err from now on (nil: succeed).
func (a *Attachment) FailResize(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resizeErr = err
}
