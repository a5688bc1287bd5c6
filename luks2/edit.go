package luks2

import (
	"fmt"
	"strconv"
)

func (h *header) addKey(dev Device, vk, passphrase []byte, slot int, p PBKDF) (int, error) {
	if err := h.requirementsMet(); err != nil {
		return -1, err
	}
	seg, err := h.meta.dataSegment()
	if err != nil {
		return -1, err
	}
	d := h.meta.segmentDigest(seg.id)
	if ok, err := d.verify(vk); err != nil {
		return -1, err
	} else if !ok {
		return -1, ErrVolumeKeyMismatch
	}
	if slot, err = h.freeSlot(slot); err != nil {
		return -1, err
	}
	ks, err := h.newKeyslot(vk, slot, p)
	if err != nil {
		return -1, err
	}
	root := h.meta.root.clone()
	root.get("keyslots").set(strconv.Itoa(slot), ks.node(len(vk)))
	root.get("digests").get(strconv.Itoa(d.id)).get("keyslots").push(jString(strconv.Itoa(slot)))
	err = h.store(dev, root, func() error { return ks.writeMaterial(dev, vk, passphrase) })
	if err != nil {
		return -1, err
	}
	return slot, nil
}

// freeSlot returns slot when it is free and in range, or the first free
// keyslot when slot is -1.
func (h *header) freeSlot(slot int) (int, error) {
	if slot < 0 {
		for slot = 0; slot < maxKeyslots && h.meta.keyslots[slot] != nil; slot++ {
		}
		if slot == maxKeyslots {
			return -1, ErrNoFreeSlot
		}
		return slot, nil
	}
	if slot >= maxKeyslots {
		return -1, fmt.Errorf("keyslot %d is out of range", slot)
	}
	if h.meta.keyslots[slot] != nil {
		return -1, fmt.Errorf("keyslot %d is not free", slot)
	}
	return slot, nil
}

// store is an edit's write: it validates root as the next metadata, checks
// that the device still holds the header h was read from, runs before (the
// key material or wipe the new metadata relies on; nil for none), and
// writes root to both header copies. Nothing is written when root is not
// valid.
func (h *header) store(dev Device, root *node, before func() error) error {
	m, err := h.prepare(root)
	if err != nil {
		return err
	}
	if err := h.unchanged(dev); err != nil {
		return err
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	return h.install(dev, m)
}

// replace is store for an edit of the metadata alone.
func (h *header) replace(dev Device, root *node) error { return h.store(dev, root, nil) }

// prepare validates root as the next metadata.
func (h *header) prepare(root *node) (*metadata, error) {
	m, err := parseMetadata(root, h.bin.hdrSize)
	if err != nil {
		return nil, fmt.Errorf("refusing to write: %w", err)
	}
	return m, nil
}

// install makes m the metadata and writes both header copies.
func (h *header) install(dev Device, m *metadata) error {
	old := h.meta
	h.meta = m
	if err := h.write(dev); err != nil {
		h.meta = old
		return err
	}
	return nil
}

func (h *header) killSlot(dev Device, slot int) error {
	k := h.meta.keyslots[slot]
	if k == nil {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	id := strconv.Itoa(slot)
	root := h.meta.root.clone()
	root.get("keyslots").del(id)
	for _, sect := range []string{"digests", "tokens"} {
		for _, o := range root.get(sect).vals {
			arr := o.get("keyslots")
			if arr == nil {
				continue
			}
			kept := arr.vals[:0]
			for _, v := range arr.vals {
				if v.str != id {
					kept = append(kept, v)
				}
			}
			arr.vals = kept
		}
	}
	// As cryptsetup: a digest left with neither keyslots nor segments (an
	// unbound key's) goes with its last keyslot.
	digests := root.get("digests")
	for i := 0; i < len(digests.vals); i++ {
		d := digests.vals[i]
		if ks, segs := d.get("keyslots"), d.get("segments"); ks != nil && segs != nil && len(ks.vals) == 0 && len(segs.vals) == 0 {
			digests.del(digests.keys[i])
			i--
		}
	}
	// Like cryptsetup: destroy the key material first, then drop the slot.
	return h.store(dev, root, func() error {
		if k.areaSize == 0 {
			return nil
		}
		return wipeArea(dev, k.areaOffset, k.areaSize)
	})
}

func (h *header) setLabel(dev Device, label, subsystem *string) error {
	if err := h.requirementsMet(); err != nil {
		return err
	}
	old := h.bin
	if label != nil {
		h.bin.label = fitLabel(*label)
	}
	if subsystem != nil {
		h.bin.subsystem = fitLabel(*subsystem)
	}
	if err := h.write(dev); err != nil {
		h.bin = old
		return err
	}
	return nil
}

func (h *header) setUUID(dev Device, uuid string) error {
	old := h.bin
	h.bin.uuid = uuid
	if err := h.write(dev); err != nil {
		h.bin = old
		return err
	}
	return nil
}

// checkVolumeKey checks vk against the data segment's digest.
func (h *header) checkVolumeKey(vk []byte) (bool, error) {
	seg, err := h.meta.dataSegment()
	if err != nil {
		return false, err
	}
	d := h.meta.segmentDigest(seg.id)
	if d == nil {
		return false, fmt.Errorf("segment %d has no digest", seg.id)
	}
	return d.verify(vk)
}

// setPriority stores a keyslot's priority as cryptsetup does: normal is
// the absence of the field.
func (h *header) setPriority(dev Device, slot int, p Priority) error {
	if p < PriorityIgnore || p > PriorityPrefer {
		return fmt.Errorf("invalid keyslot priority %d", p)
	}
	if err := h.requirementsMet(); err != nil {
		return err
	}
	if h.meta.keyslots[slot] == nil {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	root := h.meta.root.clone()
	k := root.get("keyslots").get(strconv.Itoa(slot))
	if p == PriorityNormal {
		k.del("priority")
	} else {
		k.set("priority", jInt(int64(p)))
	}
	return h.replace(dev, root)
}
