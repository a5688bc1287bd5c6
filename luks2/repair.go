package luks2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Repairing a LUKS1 header as cryptsetup 2.6.1's repair does
// (_check_and_convert_hdr and _keyslot_repair in lib/luks1/keymanage.c):
// keyslots that reach outside their place are checked, and the free ones
// are put back where a LUKS1 format of that key size puts them, their
// salt wiped; an ECB mode with an IV and an upper-case hash name are
// fixed. Active keyslots are never touched. LUKS2 repairs a damaged header
// copy from the good one (Header.Repair); a LUKS2 reencryption is
// recovered by opening it (OpenReencrypting).

// RepairLog receives cryptsetup's messages: Err its errors (standard
// error), Verbose what it says with -v (standard output).
type RepairLog struct {
	Err, Verbose func(string)
}

func (l RepairLog) err(format string, a ...any) {
	if l.Err != nil {
		l.Err(fmt.Sprintf(format, a...))
	}
}

func (l RepairLog) verbose(format string, a ...any) {
	if l.Verbose != nil {
		l.Verbose(fmt.Sprintf(format, a...))
	}
}

// ErrRepairFailed: the header could not be repaired; what is wrong was
// logged. Nothing was written.
var ErrRepairFailed = errors.New("repair failed")

// CheckLUKS1 reports what cryptsetup's load of a LUKS1 header says about
// it (path names the device in messages) and whether it loads.
func CheckLUKS1(dev io.ReaderAt, size int64, path string, log RepairLog) bool {
	h, ok := luks1Checked(dev, path, log)
	return ok && luks1SizeOK(h, size, path, log)
}

// RepairLUKS1 is cryptsetup's repair of the LUKS1 header on dev (size
// bytes; path names it in messages). It writes the repaired header when
// something was wrong and could be repaired; ErrRepairFailed (or ErrNotLUKS)
// when it was not.
func RepairLUKS1(dev Device, size int64, path string, log RepairLog) error {
	h, ok := luks1Checked(dev, path, log)
	if h == nil {
		return ErrNotLUKS
	}
	bad := !ok
	if strings.HasPrefix(h.cipherMode, "ecb-") {
		log.err("LUKS cipher mode %s is invalid.", h.cipherMode)
		bad = true
	}
	if strings.ToLower(h.hashSpec) != h.hashSpec {
		log.err("LUKS hash %s is invalid.", h.hashSpec)
		bad = true
	}
	if !bad {
		log.verbose("No known problems detected for LUKS header.")
	} else if err := h.repairKeyslots(dev, size, log); err != nil {
		return err
	}
	if !luks1SizeOK(h, size, path, log) {
		return ErrRepairFailed
	}
	return nil
}

// luks1Checked reads the LUKS1 header on dev and checks it as cryptsetup's
// load does, logging what it finds: nil when there is no LUKS1 header,
// false when it has a problem.
func luks1Checked(dev io.ReaderAt, path string, log RepairLog) (*luks1Header, bool) {
	raw := make([]byte, luks1HeaderSize)
	if _, err := dev.ReadAt(raw, 0); err != nil || !bytes.Equal(raw[:magicLen], magic1) {
		log.err("Device %s is not a valid LUKS device.", path)
		return nil, false
	}
	h := decodeLUKS1(raw)
	if v := int(raw[offVersion])<<8 | int(raw[offVersion+1]); v != 1 {
		log.err("Unsupported LUKS version %d.", v)
		return nil, false
	}
	ok := true
	if err := luks1Hash(h.hashSpec); err != nil {
		log.err("Requested LUKS hash %s is not supported.", h.hashSpec)
		ok = false
	} else if _, err := hashFunc(h.hashSpec); err != nil {
		log.err("Requested LUKS hash %s is not supported.", h.hashSpec)
		ok = false
	}
	if slot := h.invalidKeyslot(); slot >= 0 {
		log.err("LUKS keyslot %d is invalid.", slot)
		ok = false
	}
	return h, ok
}

// luks1SizeOK is cryptsetup's LUKS_check_device_size on load.
func luks1SizeOK(h *luks1Header, size int64, path string, log RepairLog) bool {
	need := int64(h.keyAreaEnd()) * 512
	if size > 0 && size < need {
		log.err("Device %s is too small. (LUKS1 requires at least %d bytes.)", path, need)
		return false
	}
	return true
}

// invalidKeyslot is cryptsetup's LUKS_check_keyslots: the keyslot it names
// for the first problem, or -1.
func (h *luks1Header) invalidKeyslot() int {
	af := uint64(luks1AFSectors(h.keyBytes))
	for i, s := range h.slots {
		if s.stripes != luks1Stripes || uint64(s.offset)*512 < luks1HeaderWrite {
			return i
		}
		if h.payloadOffset == 0 {
			continue
		}
		if h.payloadOffset <= s.offset || uint64(h.payloadOffset) < uint64(s.offset)+af {
			return i
		}
	}
	order := []int{0, 1, 2, 3, 4, 5, 6, 7}
	sort.SliceStable(order, func(a, b int) bool { return h.slots[order[a]].offset < h.slots[order[b]].offset })
	for i := 1; i < len(order); i++ {
		prev, next := h.slots[order[i-1]], h.slots[order[i]]
		if uint64(next.offset) < uint64(prev.offset)+af {
			return order[i-1]
		}
	}
	return -1
}

// repairKeyslots is _keyslot_repair.
func (h *luks1Header) repairKeyslots(dev Device, size int64, log RepairLog) error {
	if h.keyBytes != 16 && h.keyBytes != 32 && h.keyBytes != 64 {
		log.err("Non standard key size, manual repair required.")
		return ErrRepairFailed
	}
	if h.slots[0].offset < luks1AlignKeyslots/512 {
		log.err("Non standard keyslots alignment, manual repair required.")
		return ErrRepairFailed
	}
	next := *h
	write := false
	if strings.HasPrefix(next.cipherMode, "ecb-") {
		log.err("Cipher mode repaired (%s -> %s).", next.cipherMode, "ecb")
		next.cipherMode, write = "ecb", true
	}
	if lower := strings.ToLower(next.hashSpec); lower != next.hashSpec {
		next.hashSpec, write = lower, true
		log.err("Cipher hash repaired to lowercase (%s).", lower)
		if luks1Hash(lower) != nil {
			log.err("Requested LUKS hash %s is not supported.", lower)
			return ErrRepairFailed
		}
	}
	if !usableCipher(next.spec(), int(next.keyBytes)) {
		return ErrRepairFailed
	}
	log.verbose("Repairing keyslots.")
	offsets, _, _ := luks1Layout(int(next.keyBytes), 0)
	for i := range next.slots {
		s := &next.slots[i]
		if s.active == luks1KeyEnabled {
			continue
		}
		bad := false
		if s.offset != offsets[i] {
			log.err("Keyslot %d: offset repaired (%d -> %d).", i, s.offset, offsets[i])
			s.offset, bad = offsets[i], true
		}
		if s.stripes != luks1Stripes {
			log.err("Keyslot %d: stripes repaired (%d -> %d).", i, s.stripes, luks1Stripes)
			s.stripes, bad = luks1Stripes, true
		}
		// An MS-DOS partition table's signature in keyslot 6's salt.
		if i == 6 && h.raw[0x1fe] == 0x55 && h.raw[0x1ff] == 0xaa {
			log.err("Keyslot %d: bogus partition signature.", i)
			bad = true
		}
		if bad {
			log.err("Keyslot %d: salt wiped.", i)
			s.active, s.iterations = luks1KeyDisabled, 0
			clear(s.salt[:])
			write = true
		}
	}
	if slot := next.invalidKeyslot(); slot >= 0 {
		log.err("LUKS keyslot %d is invalid.", slot)
		log.err("Repair failed.")
		return ErrRepairFailed
	}
	if !write {
		return nil
	}
	log.verbose("Writing LUKS header to disk.")
	if end := int64(next.keyAreaEnd()) * 512; size > 0 && end > size && !fallocate(dev, end) {
		log.err("Repair failed.")
		return &LUKS1TooSmallError{Need: end}
	}
	raw := next.encode()
	for _, f := range []struct {
		off int
		s   string
	}{{40, next.cipherMode}, {72, next.hashSpec}} {
		clear(raw[f.off : f.off+32])
		copy(raw[f.off:f.off+31], f.s)
	}
	out := make([]byte, luks1HeaderWrite)
	copy(out, raw)
	if err := h.unchanged(dev); err != nil {
		return err
	}
	if _, err := dev.WriteAt(out, 0); err != nil {
		return fmt.Errorf("writing LUKS1 header: %w", err)
	}
	if err := flush(dev); err != nil {
		return err
	}
	copy(next.raw[:], raw)
	*h = next
	return nil
}

// ReencryptCrashed reports whether a LUKS2 reencryption was interrupted
// in the middle of a hotzone (a segment flagged in-reencryption): what
// cryptsetup calls a crashed reencryption, recovered by repair.
func (h *Header) ReencryptCrashed() bool {
	v2, ok := h.v2()
	if !ok {
		return false
	}
	for _, s := range v2.meta.segments {
		for _, f := range s.flags {
			if f == "in-reencryption" {
				return true
			}
		}
	}
	return false
}
