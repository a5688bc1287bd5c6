package luks2

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// cryptsetup 2.6's keyslot encryption where the volume key size is unknown.
const (
	defaultKeyslotCipher  = "aes-xts-plain64"
	defaultKeyslotKeySize = 64
)

// addUnboundKey stores key in a keyslot bound to no segment, with a digest
// of its own (luksAddKey --unbound): cryptsetup 2.6 keeps such keys for
// other uses than opening the volume, and open ignores them. A key another
// unbound keyslot holds already (a passphrase change) joins that keyslot's
// digest.
func (h *header) addUnboundKey(dev Device, key, passphrase []byte, slot int, p PBKDF) (int, error) {
	if err := h.requirementsMet(); err != nil {
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
	same, err := h.unboundDigest(key)
	if err != nil {
		return -1, err
	}
	var dn *node
	if same == nil {
		hash := strings.ToLower(p.Hash)
		if dn, err = newDigestNode(key, hash, digestIterations(p, hash, len(key)), []int{slot}, nil); err != nil {
			return -1, err
		}
	}
	var ks keyslotParams
	if h.segmentKeySize() == 0 {
		// No bound keyslot tells the volume key size: cryptsetup encrypts
		// the area with its default keyslot cipher.
		ks, err = h.newKeyslotIn(len(key), slot, p, defaultKeyslotCipher, defaultKeyslotKeySize)
	} else {
		ks, err = h.newKeyslot(key, slot, p)
	}
	if err != nil {
		return -1, err
	}
	root := h.meta.root.clone()
	root.get("keyslots").set(strconv.Itoa(slot), ks.node(len(key)))
	if same != nil {
		root.get("digests").get(strconv.Itoa(same.id)).get("keyslots").push(jString(strconv.Itoa(slot)))
	} else {
		id := 0
		for h.meta.digests[id] != nil {
			id++
		}
		root.get("digests").set(strconv.Itoa(id), dn)
	}
	if err := h.store(dev, root, func() error { return ks.writeMaterial(dev, key, passphrase) }); err != nil {
		return -1, err
	}
	return slot, nil
}

// unboundDigest returns the digest of unbound keyslots that key matches,
// or nil.
func (h *header) unboundDigest(key []byte) (*digest, error) {
	for _, id := range sortedIDs(h.meta.digests) {
		d := h.meta.digests[id]
		if len(d.segments) > 0 || len(d.keyslots) == 0 || h.meta.keyslots[d.keyslots[0]].keySize != len(key) {
			continue
		}
		ok, err := d.verify(key)
		if err != nil {
			return nil, err
		}
		if ok {
			return d, nil
		}
	}
	return nil, nil
}

// dumpUnbound writes luksDump --unbound -S slot's text for the unbound key
// that keyslot of volume uuid holds.
func dumpUnbound(w io.Writer, uuid string, slot int, key []byte, opts DumpOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "LUKS header information for %s\n", opts.Device)
	fmt.Fprintf(&b, "UUID:    \t%s\n", uuid)
	fmt.Fprintf(&b, "Keyslot: \t%d\n", slot)
	fmt.Fprintf(&b, "Key bits:\t%d\n", len(key)*8)
	writeKey(&b, "Unbound Key:\t", key, opts.KeyFile)
	_, err := io.WriteString(w, b.String())
	return err
}
