package frontend

// Resizer is an Attachment whose kernel device can take a new size while
// attached (luksd resize). The nbd frontend is one; ublk is not: Linux
// 6.12's ublk_drv fixes a device's size when it starts (its control
// commands have no size update; UBLK_CMD_UPDATE_SIZE came later), so a
// volume on /dev/ublkbN takes a close and an open to change size.
type Resizer interface {
	// Resize tells the kernel device its new size in bytes, from old.
	// The device served must already take the new size when it grows,
	// and still the old one when it shrinks.
	Resize(old, size int64) error
}

// Resize grows or shrinks /dev/nbdN. Growing, the server takes the new
// size before the kernel can send requests past the old end; shrinking,
// the kernel stops first.
func (n *nbdAttachment) Resize(old, size int64) error {
	if size > old {
		n.srv.SetSize(size)
	}
	if err := n.a.Resize(size); err != nil {
		n.srv.SetSize(old)
		return err
	}
	n.srv.SetSize(size)
	return nil
}
