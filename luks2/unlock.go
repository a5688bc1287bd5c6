package luks2

import (
	"errors"
	"fmt"
	"io"
)

// unlock opens the named keyslot, or tries the keyslots as cryptsetup
// 2.6.1 does: a pass over the preferred ones, then one over the normal
// ones (ignored ones only when named), each in the order the metadata
// lists them, not by number. With anyKey, a keyslot bound to no segment
// counts as well as the data segment's (open --test-passphrase --unbound).
func (h *header) unlock(dev io.ReaderAt, passphrase []byte, slot int, anyKey bool) ([]byte, int, error) {
	var d *digest
	if !anyKey {
		seg, err := h.meta.dataSegment()
		if err != nil {
			return nil, -1, err
		}
		if d = h.meta.segmentDigest(seg.id); d == nil {
			return nil, -1, fmt.Errorf("segment %d has no digest", seg.id)
		}
	}
	if slot >= 0 {
		// A named keyslot opens with its own digest, bound or not.
		vk, err := h.openAndVerify(dev, slot, nil, passphrase)
		if errors.Is(err, errKeyslotUnusable) {
			err = ErrNoUsableKeyslot
		}
		if err != nil {
			return nil, -1, err
		}
		return vk, slot, nil
	}
	vk, id, errPrefer := h.unlockPass(dev, passphrase, int(PriorityPrefer), d)
	if errPrefer == nil {
		return vk, id, nil
	}
	if !errors.Is(errPrefer, ErrWrongPassphrase) && !errors.Is(errPrefer, ErrNoUsableKeyslot) {
		return nil, -1, errPrefer
	}
	vk, id, err := h.unlockPass(dev, passphrase, int(PriorityNormal), d)
	if err == nil {
		return vk, id, nil
	}
	// A wrong passphrase for a preferred keyslot outweighs finding no
	// usable normal one.
	if errors.Is(errPrefer, ErrWrongPassphrase) && errors.Is(err, ErrNoUsableKeyslot) {
		err = ErrWrongPassphrase
	}
	return nil, -1, err
}

// unlockPass tries the keyslots of priority prio in metadata order, as
// cryptsetup's LUKS2_keyslot_open_priority: a wrong passphrase or an
// unusable keyslot moves on to the next, anything else stops the search.
// When none opens, the error is the last keyslot's: ErrNoUsableKeyslot
// when it is not bound to d (or no keyslot has that priority),
// ErrWrongPassphrase when it is. A nil d takes every keyslot with a digest.
func (h *header) unlockPass(dev io.ReaderAt, passphrase []byte, prio int, d *digest) ([]byte, int, error) {
	res := ErrNoUsableKeyslot
	for _, id := range h.keyslotOrder() {
		if h.meta.keyslots[id].priority != prio {
			continue
		}
		vk, err := h.openAndVerify(dev, id, d, passphrase)
		switch {
		case err == nil:
			return vk, id, nil
		case errors.Is(err, errKeyslotUnusable):
			res = ErrNoUsableKeyslot
		case errors.Is(err, ErrWrongPassphrase):
			res = err
		default:
			return nil, -1, err
		}
	}
	return nil, -1, res
}

// openAndVerify opens keyslot slot with passphrase and checks the key
// against its digest, which must be d unless d is nil.
func (h *header) openAndVerify(dev io.ReaderAt, slot int, d *digest, passphrase []byte) ([]byte, error) {
	k := h.meta.keyslots[slot]
	if k == nil || k.typ != "luks2" {
		return nil, errKeyslotUnusable
	}
	kd := h.meta.keyslotDigest(slot)
	if kd == nil || d != nil && kd != d {
		return nil, errKeyslotUnusable
	}
	vk, err := openKeyslot(dev, k, passphrase)
	if err != nil {
		return nil, err
	}
	ok, err := kd.verify(vk)
	if err != nil || !ok {
		clear(vk)
		if err == nil {
			err = ErrWrongPassphrase
		}
		return nil, err
	}
	return vk, nil
}

// keyslotOrder lists the keyslot numbers in the order of the metadata's
// keyslots object, which is the order cryptsetup tries them in.
func (h *header) keyslotOrder() []int {
	var ids []int
	for _, key := range h.meta.root.get("keyslots").keys {
		if id, ok := addressable(key); ok && h.meta.keyslots[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}
