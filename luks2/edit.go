package luks2

import (
	"errors"
	"fmt"
	"strconv"
)

// errLUKS1ReadOnly: luksd reads and unlocks LUKS1 but never rewrites it.
var errLUKS1ReadOnly = fmt.Errorf("%w: LUKS1 headers are read-only in luksd (convert with cryptsetup convert)", ErrUnsupported)

func (h *header) addKey(dev Device, vk, passphrase []byte, slot int, p PBKDF) (int, error) {
	if h.v1 != nil {
		return -1, errLUKS1ReadOnly
	}
	if err := h.usable(); err != nil {
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
		return -1, errors.New("volume key does not match the volume")
	}
	if slot < 0 {
		for slot = 0; slot < maxKeyslots && h.meta.keyslots[slot] != nil; slot++ {
		}
		if slot == maxKeyslots {
			return -1, ErrNoFreeSlot
		}
	} else if slot >= maxKeyslots {
		return -1, fmt.Errorf("keyslot %d is out of range", slot)
	} else if h.meta.keyslots[slot] != nil {
		return -1, fmt.Errorf("keyslot %d is not free", slot)
	}
	kn, err := h.newKeyslot(dev, vk, passphrase, slot, p)
	if err != nil {
		return -1, err
	}
	root := h.meta.root.clone()
	root.get("keyslots").set(strconv.Itoa(slot), kn)
	dn := root.get("digests").get(strconv.Itoa(d.id))
	arr := dn.get("keyslots")
	v := jString(strconv.Itoa(slot))
	v.parent = arr
	arr.vals = append(arr.vals, v)
	if err := h.replace(dev, root); err != nil {
		return -1, err
	}
	return slot, nil
}

// replace validates root, and when it is good makes it the metadata and
// writes both header copies.
func (h *header) replace(dev Device, root *node) error {
	m, err := parseMetadata(root, h.bin.hdrSize)
	if err != nil {
		return fmt.Errorf("refusing to write: %w", err)
	}
	old := h.meta
	h.meta = m
	if err := h.write(dev); err != nil {
		h.meta = old
		return err
	}
	return nil
}

func (h *header) killSlot(dev Device, slot int) error {
	if h.v1 != nil {
		return errLUKS1ReadOnly
	}
	k := h.meta.keyslots[slot]
	if k == nil {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	for _, r := range h.meta.mandatory {
		return fmt.Errorf("%w: mandatory requirement %q", ErrUnsupported, r)
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
	if _, err := parseMetadata(root, h.bin.hdrSize); err != nil {
		return fmt.Errorf("refusing to write: %w", err)
	}
	// Like cryptsetup: destroy the key material first, then drop the slot.
	if k.areaSize > 0 {
		if err := wipeArea(dev, k.areaOffset, k.areaSize); err != nil {
			return err
		}
	}
	return h.replace(dev, root)
}

func (h *header) setLabel(dev Device, label, subsystem *string) error {
	if h.v1 != nil {
		return errLUKS1ReadOnly
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
	if h.v1 != nil {
		return errLUKS1ReadOnly
	}
	if uuid == "" {
		var err error
		if uuid, err = newUUID(); err != nil {
			return err
		}
	}
	if !uuidPattern.MatchString(uuid) {
		return fmt.Errorf("wrong LUKS UUID format provided: %q", uuid)
	}
	old := h.bin
	h.bin.uuid = uuid
	if err := h.write(dev); err != nil {
		h.bin = old
		return err
	}
	return nil
}
