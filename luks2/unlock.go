package luks2

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// unlock opens the named keyslot, or tries the keyslots as cryptsetup
// 2.6.1 does: a pass over the preferred ones, then one over the normal
// ones (ignored ones only when named), each in the order the metadata
// lists them, not by number.
func (h *header) unlock(dev io.ReaderAt, passphrase []byte, slot int) ([]byte, int, error) {
	return h.unlockFor(dev, passphrase, slot, false)
}

// unlockFor is unlock; with anyKey, a keyslot bound to no segment counts as
// well as the data segment's (open --test-passphrase --unbound).
func (h *header) unlockFor(dev io.ReaderAt, passphrase []byte, slot int, anyKey bool) ([]byte, int, error) {
	if h.v1 != nil {
		return h.v1.unlock(dev, passphrase, slot)
	}
	if err := h.usable(); err != nil {
		return nil, -1, err
	}
	if slot >= 0 {
		k := h.meta.keyslots[slot]
		if k == nil {
			return nil, -1, fmt.Errorf("keyslot %d is not active", slot)
		}
		d := h.meta.keyslotDigest(slot)
		if d == nil {
			return nil, -1, fmt.Errorf("keyslot %d has no digest", slot)
		}
		vk, err := tryKeyslot(dev, k, d, passphrase)
		if err != nil {
			return nil, -1, err
		}
		return vk, slot, nil
	}
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
	vk, id, errPrefer := h.unlockPass(dev, passphrase, 2, d)
	if errPrefer == nil {
		return vk, id, nil
	}
	if !errors.Is(errPrefer, ErrWrongPassphrase) && !errors.Is(errPrefer, ErrNoUsableKeyslot) {
		return nil, -1, errPrefer
	}
	vk, id, err := h.unlockPass(dev, passphrase, 1, d)
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

// unlockPass tries the keyslots of priority prio in metadata order. When
// none opens, the error is the last keyslot's, as in cryptsetup:
// ErrNoUsableKeyslot when it is not bound to the data segment's digest d
// (or no keyslot has that priority), ErrWrongPassphrase when it is. A nil d
// takes every keyslot with a digest.
func (h *header) unlockPass(dev io.ReaderAt, passphrase []byte, prio int, d *digest) ([]byte, int, error) {
	m := h.meta
	res := ErrNoUsableKeyslot
	for _, id := range h.keyslotOrder() {
		k := m.keyslots[id]
		if k.priority != prio {
			continue
		}
		kd := m.keyslotDigest(id)
		if k.typ != "luks2" || kd == nil || d != nil && kd != d {
			res = ErrNoUsableKeyslot
			continue
		}
		vk, err := tryKeyslot(dev, k, kd, passphrase)
		if err == nil {
			return vk, id, nil
		}
		if errors.Is(err, ErrUnsupported) {
			return nil, -1, err
		}
		res = err
	}
	return nil, -1, res
}

// tryKeyslot opens k with passphrase and checks the key against d.
func tryKeyslot(dev io.ReaderAt, k *keyslot, d *digest, passphrase []byte) ([]byte, error) {
	vk, err := openKeyslot(dev, k, passphrase)
	if err != nil {
		return nil, err
	}
	ok, err := d.verify(vk)
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
		if id, err := strconv.Atoi(key); err == nil && h.meta.keyslots[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}
