package luks2

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ConvertKey rewraps key, the key of LUKS2 keyslot slot (as Unlock returned
// it), under passphrase with new PBKDF parameters: cryptsetup 2.6.1's
// luksConvertKey, where passphrase is the one that opened the keyslot (a
// new one makes it a passphrase change). The keyslot keeps its number,
// digest and token bindings.
//
// With inPlace (luksConvertKey -S N) the keyslot also keeps its area, its
// place in the metadata and its other fields (priority), as cryptsetup's
// rewrite leaves them; unlike cryptsetup's, which overwrites the area
// under the old metadata, the new key material first goes to a free area
// that the metadata names while it is copied home, so a crash at any
// point leaves a keyslot that opens (two header writes where cryptsetup
// makes one; when no area is free it rewrites in place, as cryptsetup).
// Without inPlace (no -S) the keyslot is created anew in the first free
// area and listed last, and the old area is wiped, as cryptsetup does.
//
// The area cipher and key size stay the keyslot's own.
func (h *Header) ConvertKey(dev Device, slot int, key, passphrase []byte, p PBKDF, inPlace bool) error {
	v2, ok := h.v2()
	if !ok {
		return errConvertLUKS1
	}
	mode := rewrapNew
	if inPlace {
		mode = rewrapInPlace
	}
	return v2.rewrap(dev, slot, key, passphrase, p, mode)
}

// ChangeKey gives LUKS2 keyslot slot, whose key is key, a new passphrase:
// cryptsetup 2.6.1's luksChangeKey without --key-slot. The keyslot keeps its
// number, its place in the metadata, its priority and its tokens. While a
// keyslot number is free (cryptsetup builds the new keyslot under one), the
// new key material goes to the first free area and the old area is wiped
// once the header names the new one; with all 32 numbers taken the keyslot
// is rewritten in its own area, as ConvertKey in place does (which is what
// luksChangeKey --key-slot does in any case).
func (h *Header) ChangeKey(dev Device, slot int, key, passphrase []byte, p PBKDF) error {
	v2, ok := h.v2()
	if !ok {
		return errConvertLUKS1
	}
	mode := rewrapMove
	if _, err := v2.freeSlot(-1); err != nil {
		mode = rewrapInPlace
	}
	return v2.rewrap(dev, slot, key, passphrase, p, mode)
}

// errConvertLUKS1: ConvertKey and ChangeKey rewrap LUKS2 keyslots only.
var errConvertLUKS1 = fmt.Errorf("%w: luksConvertKey needs a LUKS2 header", ErrUnsupported)

// rewrapMode says where rewrap puts a keyslot's new key material.
type rewrapMode int

const (
	rewrapNew     rewrapMode = iota // first free area, keyslot listed last
	rewrapInPlace                   // its own area, through a free one
	rewrapMove                      // first free area, keyslot kept in place
)

func (h *header) rewrap(dev Device, slot int, key, passphrase []byte, p PBKDF, mode rewrapMode) error {
	if err := h.requirementsMet(); err != nil {
		return err
	}
	k := h.meta.keyslots[slot]
	if k == nil || k.typ != "luks2" {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	d := h.meta.keyslotDigest(slot)
	if d == nil {
		return fmt.Errorf("keyslot %d has no digest", slot)
	}
	if ok, err := d.verify(key); err != nil {
		return err
	} else if !ok {
		return ErrVolumeKeyMismatch
	}
	areaCipher, areaKeySize, err := p.areaEncryption(k.areaCipher, k.areaKeySize)
	if err != nil {
		return err
	}
	p = p.forKeyslot()
	salt := make([]byte, keyslotSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	kp, err := p.params(salt, len(key))
	if err != nil {
		return err
	}
	areaSize := k.areaSize
	if mode == rewrapNew {
		areaSize = keyslotAreaSize(len(key))
	}
	off, gapErr := h.areaGap(areaSize)
	if gapErr != nil {
		if mode == rewrapNew {
			return gapErr
		}
		off = k.areaOffset
	}
	ks := keyslotParams{
		id: slot, areaOffset: off, areaSize: areaSize,
		areaCipher: areaCipher, areaKeySize: areaKeySize,
		afHash: strings.ToLower(p.Hash), stripes: defaultStripes, kdf: kp,
	}
	kn := ks.node(len(key))
	material := func() error { return ks.writeMaterial(dev, key, passphrase) }
	id := strconv.Itoa(slot)
	root := h.meta.root.clone()
	keyslots := root.get("keyslots")
	if mode == rewrapNew {
		keyslots.del(id)
		keyslots.set(id, kn)
		if err := h.store(dev, root, material); err != nil {
			return err
		}
		return wipeDurably(dev, k.areaOffset, k.areaSize)
	}
	kj := keyslots.get(id)
	kj.set("af", kn.get("af"))
	kj.set("kdf", kn.get("kdf"))
	area := kj.get("area")
	area.set("offset", jUint64Str(off))
	area.set("encryption", kn.get("area").get("encryption"))
	area.set("key_size", kn.get("area").get("key_size"))
	if off == k.areaOffset || mode == rewrapMove {
		if err := h.store(dev, root, material); err != nil {
			return err
		}
		if off == k.areaOffset {
			return nil
		}
		return wipeDurably(dev, k.areaOffset, k.areaSize)
	}
	return h.rewrapThrough(dev, root, material, k, off, areaSize)
}

// rewrapThrough rewrites keyslot k in its own area through the free area
// at off: root names the new material there, then, once it is copied
// home, a second header names k's own area again and the free area is
// wiped. Both headers are validated before anything is written.
func (h *header) rewrapThrough(dev Device, root *node, material func() error, k *keyslot, off, areaSize uint64) error {
	id := strconv.Itoa(k.id)
	home := root.clone()
	home.get("keyslots").get(id).get("area").set("offset", jUint64Str(k.areaOffset))
	if _, err := h.prepare(home); err != nil {
		return err
	}
	if err := h.store(dev, root, material); err != nil {
		return err
	}
	copyHome := func() error {
		buf := make([]byte, areaSize)
		defer clear(buf)
		if _, err := dev.ReadAt(buf, int64(off)); err != nil {
			return fmt.Errorf("reading keyslot %d area: %w", k.id, err)
		}
		if _, err := dev.WriteAt(buf, int64(k.areaOffset)); err != nil {
			return fmt.Errorf("writing keyslot %d area: %w", k.id, err)
		}
		return nil
	}
	if err := h.store(dev, home, copyHome); err != nil {
		return err
	}
	return wipeDurably(dev, off, areaSize)
}

// MoveKey gives the volume key vk, which keyslot oldSlot holds, the new
// passphrase pass as cryptsetup's LUKS1 luksChangeKey without --key-slot
// does: the new passphrase goes to the first free keyslot and oldSlot is
// wiped; with no free keyslot, oldSlot is rewritten in place. It returns
// the keyslot now holding pass.
func (h *Header) MoveKey(dev Device, vk, pass []byte, oldSlot int, p PBKDF) (int, error) {
	if _, err := h.FreeKeyslot(); errors.Is(err, ErrNoFreeSlot) {
		return h.ReplaceKey(dev, vk, pass, oldSlot, -1, p)
	}
	slot, err := h.AddKey(dev, vk, pass, -1, p)
	if err != nil {
		return 0, err
	}
	return slot, h.KillSlot(dev, oldSlot)
}

// ReplaceKey replaces the passphrase of oldSlot, which holds vk, with
// pass, keeping its number as cryptsetup does for LUKS1 with --key-slot,
// or moving it to newSlot >= 0 (--new-key-slot, LUKS1 and LUKS2; LUKS2
// otherwise uses ChangeKey). The new passphrase is written to a free
// keyslot before the old one is wiped, so an interruption never leaves the
// volume without a working keyslot; to keep the number, that costs a
// second key derivation. With every keyslot taken, the old one is wiped first and
// rewritten, which is as far as cryptsetup's in-place rewrite goes too.
func (h *Header) ReplaceKey(dev Device, vk, pass []byte, oldSlot, newSlot int, p PBKDF) (int, error) {
	add := h.AddKey
	if h.Unbound(oldSlot) {
		// An unbound key (luksChangeKey -S N) stays unbound.
		add = h.AddUnboundKey
	}
	tmp, err := add(dev, vk, pass, newSlot, p)
	if errors.Is(err, ErrNoFreeSlot) && newSlot < 0 {
		if err := h.KillSlot(dev, oldSlot); err != nil {
			return 0, err
		}
		return add(dev, vk, pass, oldSlot, p)
	}
	if err != nil {
		return 0, err
	}
	if err := h.KillSlot(dev, oldSlot); err != nil {
		return 0, err
	}
	if newSlot >= 0 {
		return tmp, nil
	}
	if _, err := add(dev, vk, pass, oldSlot, p); err != nil {
		// The new passphrase still opens keyslot tmp.
		return 0, fmt.Errorf("new passphrase stored in key slot %d, not %d: %w", tmp, oldSlot, err)
	}
	return oldSlot, h.KillSlot(dev, tmp)
}
