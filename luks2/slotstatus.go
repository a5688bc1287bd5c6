package luks2

// Which keyslots a header uses, as cryptsetup 2.6.1's crypt_keyslot_max,
// crypt_keyslot_status (LUKS2_keyslot_info, LUKS_keyslot_info) and
// keyslot search answer: the CLI asks these questions instead of counting
// keyslots itself.

// Keyslot counts of the two formats (LUKS_NUMKEYS, LUKS2_KEYSLOTS_MAX).
const (
	luks1NumKeys = 8
	maxKeyslots  = 32
)

// MaxKeyslots is the number of keyslots a header of LUKS version has:
// 8 for LUKS1, 32 for LUKS2. Keyslots are numbered from 0.
func MaxKeyslots(version int) int {
	if version == 1 {
		return luks1NumKeys
	}
	return maxKeyslots
}

// KeyslotStatus is what a keyslot number holds.
type KeyslotStatus int

const (
	// KeyslotInvalid: the number is out of range for the header.
	KeyslotInvalid KeyslotStatus = iota
	// KeyslotInactive: the keyslot is free.
	KeyslotInactive
	// KeyslotActive: the keyslot holds the volume key, and so does
	// another one.
	KeyslotActive
	// KeyslotActiveLast: the keyslot is the only one holding the volume
	// key; without it the volume does not open.
	KeyslotActiveLast
	// KeyslotUnbound: the keyslot holds a key bound to no segment
	// (luksAddKey --unbound), not the volume key.
	KeyslotUnbound
)

// InUse reports whether the keyslot holds a key, bound or not.
func (s KeyslotStatus) InUse() bool {
	return s == KeyslotActive || s == KeyslotActiveLast || s == KeyslotUnbound
}

// Bound reports whether the keyslot holds the volume key.
func (s KeyslotStatus) Bound() bool { return s == KeyslotActive || s == KeyslotActiveLast }

// KeyslotStatus reports what keyslot slot holds. A LUKS2 keyslot whose
// digest is bound to no segment (or that has no digest) is unbound; the
// others hold the volume key.
func (h *Header) KeyslotStatus(slot int) KeyslotStatus { return h.impl.keyslotStatus(slot) }

// BoundKeyslots returns the numbers of the keyslots holding the volume key,
// ascending: the ones cryptsetup counts for "the last keyslot" and tries
// for a remaining passphrase (every active one for LUKS1).
func (h *Header) BoundKeyslots() []int {
	var ids []int
	for _, s := range h.ActiveKeyslots() {
		if h.KeyslotStatus(s).Bound() {
			ids = append(ids, s)
		}
	}
	return ids
}

// FreeKeyslot returns the keyslot AddKey takes when asked for none: the
// lowest free number, or ErrNoFreeSlot.
func (h *Header) FreeKeyslot() (int, error) { return h.impl.freeSlot(-1) }

// keyslotStatus is KeyslotStatus for a LUKS2 header.
func (h *header) keyslotStatus(slot int) KeyslotStatus {
	switch {
	case slot < 0 || slot >= maxKeyslots:
		return KeyslotInvalid
	case h.meta.keyslots[slot] == nil:
		return KeyslotInactive
	case h.unboundSlot(slot):
		return KeyslotUnbound
	}
	for id := range h.meta.keyslots {
		if id != slot && !h.unboundSlot(id) {
			return KeyslotActive
		}
	}
	return KeyslotActiveLast
}

// unboundSlot reports whether existing keyslot slot holds no volume key:
// its digest is bound to no segment, or it has none.
func (h *header) unboundSlot(slot int) bool {
	d := h.meta.keyslotDigest(slot)
	return d == nil || len(d.segments) == 0
}

// keyslotStatus is KeyslotStatus for a LUKS1 header: LUKS1 keyslots all
// hold the volume key.
func (h *luks1Header) keyslotStatus(slot int) KeyslotStatus {
	if slot < 0 || slot >= luks1NumKeys {
		return KeyslotInvalid
	}
	if h.slots[slot].active != luks1KeyEnabled {
		return KeyslotInactive
	}
	for i, s := range h.slots {
		if i != slot && s.active == luks1KeyEnabled {
			return KeyslotActive
		}
	}
	return KeyslotActiveLast
}
