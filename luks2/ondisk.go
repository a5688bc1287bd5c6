package luks2

import "io"

// onDisk is a loaded header of either format, as Header uses it: LUKS2's
// *header (header.go, read.go, edit.go, unlock.go, ...) and LUKS1's
// *luks1Header (luks1.go, luks1_edit.go, luks1_format.go) each implement
// it. What only LUKS2 has (label, flags, tokens, priorities, unbound keys,
// ConvertKey, JSON, repairable copies) reaches the LUKS2 header through
// Header.v2 instead.
type onDisk interface {
	version() int
	uuid() string
	// segment is the data segment, refused when luksd cannot map it.
	segment() (Segment, error)
	activeKeyslots() []int
	keyslotStatus(slot int) KeyslotStatus
	// freeSlot returns slot when it is free and in range, or the first
	// free keyslot for -1 (ErrNoFreeSlot when there is none).
	freeSlot(slot int) (int, error)
	// headerSize is the whole header area (LUKS1: up to the payload).
	headerSize() int64
	// requirementsMet refuses what cryptsetup refuses to edit for the
	// header's mandatory requirements (LUKS1 has none).
	requirementsMet() error

	// unlock opens keyslot slot (-1: any, in cryptsetup's order); with
	// anyKey, unbound keyslots count too.
	unlock(dev io.ReaderAt, passphrase []byte, slot int, anyKey bool) ([]byte, int, error)
	// checkVolumeKey reports whether vk is the volume key.
	checkVolumeKey(vk []byte) (bool, error)
	addKey(dev Device, vk, passphrase []byte, slot int, p PBKDF) (int, error)
	killSlot(dev Device, slot int) error
	// setUUID stores uuid, checked and in lower case already.
	setUUID(dev Device, uuid string) error
	dump(w io.Writer, opts DumpOptions) error

	headerArea
}

// headerArea is where a header keeps its bytes, as luksHeaderBackup and
// luksHeaderRestore (backup.go, restore.go) copy them.
type headerArea interface {
	// areaEnd is the end of what a backup holds: LUKS2's two header copies
	// and keyslots area, LUKS1's header up to its last key material.
	areaEnd() int64
	// scrubBackup clears what a backup image buf must not carry.
	scrubBackup(buf []byte)
	// headerCopies are the header's own bytes, in the order a restore
	// writes them.
	headerCopies() []span
	// keyslotAreas lists the key material of the keyslots in use.
	keyslotAreas() []slotArea
	// freePlace finds n bytes for key material outside taken.
	freePlace(n int64, taken []span) (span, bool)
	// writeBridge writes a header naming the moved keyslots' material at
	// its new places, ranking above cur (the device's header, or nil).
	writeBridge(dev Device, buf []byte, moves []move, cur onDisk) error
	// checkReplace is checkRestore's judgement of this header, on the
	// device, being replaced by backup b of the same version.
	checkReplace(b onDisk, rc *RestoreCheck) error
}

var (
	_ onDisk = (*header)(nil)
	_ onDisk = (*luks1Header)(nil)
)

// v2 returns the LUKS2 header behind h, or false for a LUKS1 one.
func (h *Header) v2() (*header, bool) {
	v2, ok := h.impl.(*header)
	return v2, ok
}
