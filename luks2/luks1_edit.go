package luks2

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/luksd/luksd/dmcrypt"
)

// LUKS1 edits, made as cryptsetup 2.6.1 makes them. LUKS1 has one header
// copy, 592 bytes at offset 0, and eight keyslots whose key material sits
// at fixed offsets the header records; an edit rewrites the header in one
// write after the key material it points to is on disk.

// ErrLUKS1PBKDF: LUKS1 keyslots use PBKDF2 only.
var ErrLUKS1PBKDF = fmt.Errorf("%w: requested PBKDF type is not supported for LUKS1", ErrUnsupported)

// encode returns the header as read with the UUID and keyslots patched in.
func (h *luks1Header) encode() []byte {
	raw := h.raw
	clear(raw[168:208])
	copy(raw[168:207], h.uuidText)
	for i, s := range h.slots {
		b := raw[luks1KeyblockBase+i*luks1KeyblockSize:]
		binary.BigEndian.PutUint32(b, s.active)
		binary.BigEndian.PutUint32(b[4:], s.iterations)
		copy(b[8:40], s.salt[:])
		binary.BigEndian.PutUint32(b[40:], s.offset)
		binary.BigEndian.PutUint32(b[44:], s.stripes)
	}
	return raw[:]
}

// store validates next as a header cryptsetup would read, makes what was
// written before durable, writes next over the header in a single write,
// flushes, and makes it h. It refuses to write over a header that changed
// since h was read.
func (h *luks1Header) store(dev Device, next *luks1Header) error {
	raw := next.encode()
	if _, err := readLUKS1(bytes.NewReader(raw), 0); err != nil {
		return fmt.Errorf("refusing to write: %w", err)
	}
	if !h.fresh {
		if err := h.unchanged(dev); err != nil {
			return err
		}
	}
	if err := flush(dev); err != nil {
		return err
	}
	if _, err := dev.WriteAt(raw, 0); err != nil {
		return fmt.Errorf("writing LUKS1 header: %w", err)
	}
	if err := flush(dev); err != nil {
		return err
	}
	copy(next.raw[:], raw)
	next.fresh = false
	*h = *next
	return nil
}

// unchanged refuses an edit when the header on dev differs from the one h
// was read from (cryptsetup 2.6.1 does not lock LUKS1 headers; luksd
// notices what another editor wrote meanwhile).
func (h *luks1Header) unchanged(dev io.ReaderAt) error {
	var b [luks1HeaderSize]byte
	if _, err := dev.ReadAt(b[:], 0); err != nil {
		return fmt.Errorf("reading LUKS1 header: %w", err)
	}
	if b != h.raw {
		return ErrConcurrentUpdate
	}
	return nil
}

// freeSlot returns slot when it is free and in range, or the first free
// keyslot when slot is -1.
func (h *luks1Header) freeSlot(slot int) (int, error) {
	if slot < 0 {
		for i, s := range h.slots {
			if s.active != luks1KeyEnabled {
				return i, nil
			}
		}
		return -1, ErrNoFreeSlot
	}
	if slot >= luks1NumKeys {
		return -1, fmt.Errorf("keyslot %d is out of range", slot)
	}
	if h.slots[slot].active == luks1KeyEnabled {
		return -1, fmt.Errorf("keyslot %d is not free", slot)
	}
	return slot, nil
}

// slotIterations is the PBKDF2 iteration count of a new keyslot: forced,
// or calibrated to p.IterTime with the header's hash and key size; never
// below LUKS1's minimum of 1000.
func (h *luks1Header) slotIterations(p PBKDF) (int, error) {
	if err := CheckPBKDF(p, 1); err != nil {
		return 0, err
	}
	if p.Iterations > 0 {
		return p.Iterations, nil
	}
	return calibratePBKDF2(h.hashSpec, int(h.keyBytes), p.withDefaults().IterTime), nil
}

// addKey writes vk's key material for passphrase into a free keyslot and
// then enables the keyslot in the header.
func (h *luks1Header) addKey(dev Device, vk, passphrase []byte, slot int, p PBKDF) (int, error) {
	if err := h.usable(); err != nil {
		return -1, err
	}
	if p.Type != "" && p.Type != "pbkdf2" {
		return -1, ErrLUKS1PBKDF
	}
	if ok, err := h.checkVolumeKey(vk); err != nil {
		return -1, err
	} else if !ok {
		return -1, ErrVolumeKeyMismatch
	}
	slot, err := h.freeSlot(slot)
	if err != nil {
		return -1, err
	}
	next := *h
	material, err := next.seal(slot, vk, passphrase, p)
	if err != nil {
		return -1, err
	}
	defer clear(material)
	// Nothing is written to a keyslot another editor may have taken.
	if err := h.unchanged(dev); err != nil {
		return -1, err
	}
	// Key material first (store makes it durable before the header): until
	// the header names it, a crash leaves the keyslot disabled and the
	// volume as it was.
	if err := next.writeMaterial(dev, slot, material); err != nil {
		return -1, err
	}
	if err := h.store(dev, &next); err != nil {
		return -1, err
	}
	return slot, nil
}

// seal enables keyslot slot of h for passphrase (a new salt, PBKDF2
// iterations as p asks) and returns its key material, vk split and
// encrypted; nothing is written.
func (h *luks1Header) seal(slot int, vk, passphrase []byte, p PBKDF) ([]byte, error) {
	iterations, err := h.slotIterations(p)
	if err != nil {
		return nil, err
	}
	newHash, err := hashFunc(h.hashSpec)
	if err != nil {
		return nil, err
	}
	s := &h.slots[slot]
	if _, err := rand.Read(s.salt[:]); err != nil {
		return nil, err
	}
	s.iterations = uint32(iterations)
	key, err := pbkdf2.Key(newHash, string(passphrase), s.salt[:], iterations, int(h.keyBytes))
	if err != nil {
		return nil, err
	}
	c, err := dmcrypt.New(h.spec(), key)
	clear(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer c.Wipe()
	buf := make([]byte, afSize(int(h.keyBytes), int(s.stripes)))
	if err := afSplit(buf, vk, int(s.stripes), newHash); err != nil {
		clear(buf)
		return nil, err
	}
	c.Encrypt(buf, 0, areaSectorSize)
	s.active = luks1KeyEnabled
	return buf, nil
}

// writeMaterial writes keyslot slot's key material where h places it.
func (h *luks1Header) writeMaterial(dev io.WriterAt, slot int, material []byte) error {
	if _, err := dev.WriteAt(material, int64(h.slots[slot].offset)*512); err != nil {
		return fmt.Errorf("writing keyslot %d: %w", slot, err)
	}
	return nil
}

// killSlot disables the keyslot in the header (its salt and iterations
// zeroed, so the material left on disk cannot be used even before it is
// wiped), then overwrites its key material with random bytes.
func (h *luks1Header) killSlot(dev Device, slot int) error {
	if slot < 0 || slot >= luks1NumKeys || h.slots[slot].active != luks1KeyEnabled {
		return fmt.Errorf("keyslot %d is not active", slot)
	}
	next := *h
	s := &next.slots[slot]
	s.active = luks1KeyDisabled
	s.iterations = 0
	clear(s.salt[:])
	if err := h.store(dev, &next); err != nil {
		return err
	}
	// Exactly the key material, as cryptsetup wipes it.
	if err := wipeArea(dev, uint64(s.offset)*512, uint64(afSize(int(h.keyBytes), int(s.stripes)))); err != nil {
		return err
	}
	return flush(dev)
}

// setUUID rewrites the header with a new UUID.
func (h *luks1Header) setUUID(dev Device, uuid string) error {
	if len(uuid) >= uuidLen {
		return errors.New("UUID too long")
	}
	next := *h
	next.uuidText = uuid
	return h.store(dev, &next)
}
