package daemon

import (
	"errors"
	"fmt"

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
		if errors.Is(err, blockdev.ErrInUse) {
			return nil, nil, false, InUse(spec.Location, err)
		}
		return nil, nil, false, &Error{Kind: ErrNoDevice, Msg: fmt.Sprintf("Device %s does not exist or access denied.", spec.Location), Err: err}
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
