package daemon

import (
	"errors"
	"fmt"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
)

// openCrypt opens and claims spec's data device (blockdev.Open: a path
// today, any registered location scheme, which logs to Log) and puts the
// crypt layer over it.
// The claim (O_EXCL on a block device, an OFD lock on an image) lasts
// until the device is closed; a device in use is refused with
// cryptsetup's message (ErrBusy). The crypt layer holds its own copy of
// the key schedule, locked in memory when the memory-lock limit allows it
// (keysLocked): the caller may wipe key right away.
func openCrypt(spec Spec, key *keyring.Secret) (d *dmcrypt.Device, backend blockdev.Backend, keysLocked bool, err error) {
	ro := spec.Options.ReadOnly
	backend, err = blockdev.Open(spec.Location, blockdev.OpenOptions{ReadOnly: ro, Exclusive: !spec.Options.Shared, Logf: Log.Printf})
	if err != nil {
		return nil, nil, false, openError(spec.Location, err)
	}
	if spec.reencrypting() {
		// newSegmented owns the backend from here, also when it fails.
		d, keysLocked, err = newSegmented(backend, spec, key.Bytes())
		if err != nil {
			return nil, nil, false, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Device %s: %v.", spec.Location, err), Err: err}
		}
		return d, backend, keysLocked, nil
	}
	seg := spec.Segment
	c, err := sectorCipher(seg, key.Bytes())
	if err != nil {
		backend.Close()
		return nil, nil, false, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("cipher %s: %v", seg.Cipher, err), Err: err}
	}
	_, lerr := keyring.LockReachable(c)
	d, err = dmcrypt.NewDevice(backend, c, dmcrypt.DeviceOptions{
		Offset:        seg.Offset,
		Size:          seg.Size,
		SectorSize:    seg.SectorSize,
		IVOffset:      seg.IVOffset,
		AllowDiscards: spec.Options.AllowDiscards,
		ReadOnly:      ro,
	})
	if err != nil {
		c.Wipe()
		backend.Close()
		return nil, nil, false, &Error{Kind: ErrNoDevice, Msg: fmt.Sprintf("Device %s: %v.", spec.Location, err), Err: err}
	}
	return d, backend, lerr == nil, nil
}

// openError is blockdev.Open's refusal of location in one line, as the
// CLI's header verbs say it: cryptsetup's words for a local device, a
// missing remote volume and one in use; else a remote store's own error
// (a request it refused, a CA bundle that cannot be read), with exit 2
// for credentials it refused or that were not found.
func openError(location string, err error) error {
	const exitPermission = 2 // cryptsetup's: no permission, bad passphrase
	switch {
	case errors.Is(err, blockdev.ErrInUse):
		return InUse(location, err)
	case blockdev.Scheme(location) == "" || errors.Is(err, os.ErrNotExist):
		return &Error{Kind: ErrNoDevice, Msg: fmt.Sprintf("Device %s does not exist or access denied.", location), Err: err}
	}
	msg := "luksd: " + oneLine(err)
	if errors.Is(err, os.ErrPermission) {
		return &Error{Kind: ErrNoDevice, Msg: msg, Err: &StartError{Code: exitPermission, Msg: msg, Err: err}}
	}
	return &Error{Kind: ErrNoDevice, Msg: msg, Err: err}
}

// sectorCipher is seg's sector cipher keyed with key.
func sectorCipher(seg Segment, key []byte) (dmcrypt.SectorCipher, error) {
	c, err := dmcrypt.New(seg.Cipher, key)
	if err != nil {
		return nil, err
	}
	if seg.IVLargeSectors {
		c = dmcrypt.LargeIVSectors(c)
	}
	return c, nil
}
