package luks2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// addUnboundKey stores key in a keyslot bound to no segment, with a digest
// of its own (luksAddKey --unbound): cryptsetup 2.6 keeps such keys for
// other uses than opening the volume, and open ignores them.
func (h *header) addUnboundKey(dev Device, key, passphrase []byte, slot int, p PBKDF) (int, error) {
	if h.v1 != nil {
		return -1, fmt.Errorf("%w: LUKS1 has no unbound keyslots", ErrUnsupported)
	}
	if err := h.usable(); err != nil {
		return -1, err
	}
	if len(key) == 0 {
		return -1, errors.New("an unbound key needs a key size")
	}
	slot, err := h.freeSlot(slot)
	if err != nil {
		return -1, err
	}
	p = p.withDefaults()
	hash := strings.ToLower(p.Hash)
	dn, err := newDigestNode(key, hash, digestIterations(p, hash, len(key)), []int{slot}, nil)
	if err != nil {
		return -1, err
	}
	kn, err := h.newKeyslot(dev, key, passphrase, slot, p)
	if err != nil {
		return -1, err
	}
	id := 0
	for h.meta.digests[id] != nil {
		id++
	}
	root := h.meta.root.clone()
	root.get("keyslots").set(strconv.Itoa(slot), kn)
	root.get("digests").set(strconv.Itoa(id), dn)
	if err := h.replace(dev, root); err != nil {
		return -1, err
	}
	return slot, nil
}

func (h *header) unbound(slot int) bool {
	if h.v1 != nil || h.meta.keyslots[slot] == nil {
		return false
	}
	d := h.meta.keyslotDigest(slot)
	return d == nil || len(d.segments) == 0
}
