package daemon

import (
	"fmt"

	"github.com/luksd/luksd/daemon/frontend"
)

// Discards on and off (cryptsetup refresh NAME [--allow-discards]):
// "discards on|off" on the control socket switches the running volume's
// discards as dm-crypt's allow_discards after a table reload. The crypt
// layer decides; the kernel device must be one that lets it
// (frontend.DiscardSwitch).

// setDiscards allows or stops discards on the running volume.
func (r *liveControl) setDiscards(on bool) error {
	if on == r.st.AllowDiscards {
		return nil
	}
	if on && !r.dev.CanDiscard() {
		if r.st.ReadOnly {
			// dm-crypt keeps the flag on a read-only mapping, where a
			// discard fails anyway: so does status.
			return r.recordDiscards(on)
		}
		return errorf(ErrInvalid, "Discards are not supported by the data device %s.", r.st.Image)
	}
	k, ok := r.att.(frontend.DiscardSwitch)
	if !ok {
		return errorf(ErrInvalid, "luksd cannot change discards of %s while it is attached (Linux 6.12's %s fixes them when it starts); close and open %s again.",
			r.st.Device, r.st.Frontend, r.st.Name)
	}
	if err := k.SetDiscards(on); err != nil {
		return err
	}
	if err := r.dev.SetDiscards(on); err != nil {
		return err
	}
	return r.recordDiscards(on)
}

func (r *liveControl) recordDiscards(on bool) error {
	r.st.AllowDiscards = on
	Log.Printf("%s: discards %s", r.st.Name, map[bool]string{true: "allowed", false: "refused"}[on])
	if err := writeState(r.st); err != nil {
		return fmt.Errorf("cannot write the state file: %v", err)
	}
	return nil
}

// SetDiscards asks name's daemon to allow discards (on) or to stop them.
// Refusals come back as ErrInvalid.
func SetDiscards(name string, on bool) error {
	arg := "off"
	if on {
		arg = "on"
	}
	return askLive(name, "discards "+arg)
}
