package luks2

import (
	"crypto/pbkdf2"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// LUKS1's 592-byte partition header (big-endian), as cryptsetup reads it.
const (
	luks1HeaderSize   = 592
	luks1DigestSize   = 20
	luks1SaltSize     = 32
	luks1Stripes      = 4000
	luks1KeyEnabled   = 0x00AC71F3
	luks1KeyDisabled  = 0x0000DEAD
	luks1KeyblockBase = 208
	luks1KeyblockSize = 48
)

type luks1Keyslot struct {
	active     uint32
	iterations uint32
	salt       [luks1SaltSize]byte
	offset     uint32 // key material, 512-byte sectors
	stripes    uint32
}

type luks1Header struct {
	cipherName, cipherMode, hashSpec string
	payloadOffset                    uint32 // sectors
	keyBytes                         uint32
	mkDigest                         [luks1DigestSize]byte
	mkDigestSalt                     [luks1SaltSize]byte
	mkDigestIter                     uint32
	uuidText                         string
	slots                            [luks1NumKeys]luks1Keyslot

	// raw is the header as read; edits patch the fields they change into
	// a copy, so bytes luksd does not interpret are written back as found.
	raw [luks1HeaderSize]byte
	// fresh: being formatted; nothing on the device is this header yet.
	fresh bool
}

func luks1AFSectors(keyBytes uint32) uint32 {
	return uint32(afSize(int(keyBytes), luks1Stripes) / 512)
}

// KeyslotInvalidError: LUKS1 keyslot Slot reaches outside its place or
// over another one, or has an unknown state; the header does not load
// (cryptsetup's "LUKS keyslot N is invalid.").
type KeyslotInvalidError struct{ Slot int }

func (e *KeyslotInvalidError) Error() string {
	return fmt.Sprintf("LUKS keyslot %d is invalid", e.Slot)
}

// LUKS1TooSmallError: the device is smaller than its LUKS1 header area
// (Need bytes: up to the payload, or the last key material); the header
// does not load.
type LUKS1TooSmallError struct{ Need int64 }

func (e *LUKS1TooSmallError) Error() string {
	return fmt.Sprintf("device is too small: LUKS1 requires at least %d bytes", e.Need)
}

// readLUKS1 reads and validates a LUKS1 header the way cryptsetup does
// (KeyslotInvalidError for slots reaching outside their place).
func readLUKS1(dev io.ReaderAt, size int64) (*luks1Header, error) {
	raw := make([]byte, luks1HeaderSize)
	if _, err := dev.ReadAt(raw, 0); err != nil {
		return nil, fmt.Errorf("%w: reading LUKS1 header: %v", ErrNotLUKS, err)
	}
	h := decodeLUKS1(raw)
	if h.keyBytes == 0 || h.keyBytes > 256 {
		return nil, fmt.Errorf("LUKS1 header has an invalid key size %d", h.keyBytes)
	}
	if h.mkDigestIter == 0 {
		return nil, errors.New("LUKS1 header has zero digest iterations")
	}
	if err := luks1Hash(h.hashSpec); err != nil {
		return nil, err
	}
	af := luks1AFSectors(h.keyBytes)
	order := []int{0, 1, 2, 3, 4, 5, 6, 7}
	sort.SliceStable(order, func(a, b int) bool { return h.slots[order[a]].offset < h.slots[order[b]].offset })
	for i, s := range h.slots {
		bad := s.stripes != luks1Stripes ||
			uint64(s.offset)*512 < luks1HeaderSize ||
			h.payloadOffset != 0 && h.payloadOffset <= s.offset ||
			h.payloadOffset != 0 && uint64(h.payloadOffset) < uint64(s.offset)+uint64(af) ||
			s.active != luks1KeyEnabled && s.active != luks1KeyDisabled
		if bad {
			return nil, &KeyslotInvalidError{Slot: i}
		}
	}
	for i := 1; i < len(order); i++ {
		prev, next := h.slots[order[i-1]], h.slots[order[i]]
		if uint64(next.offset) < uint64(prev.offset)+uint64(af) {
			return nil, &KeyslotInvalidError{Slot: order[i]}
		}
	}
	need := int64(h.headerSize())
	if size > 0 && size < need {
		return nil, &LUKS1TooSmallError{Need: need}
	}
	return h, nil
}

// decodeLUKS1 decodes the fields of a raw LUKS1 header; nothing is
// checked.
func decodeLUKS1(raw []byte) *luks1Header {
	h := &luks1Header{
		cipherName:    cString(raw[8:40]),
		cipherMode:    cString(raw[40:72]),
		hashSpec:      cString(raw[72:104]),
		payloadOffset: binary.BigEndian.Uint32(raw[104:]),
		keyBytes:      binary.BigEndian.Uint32(raw[108:]),
		mkDigestIter:  binary.BigEndian.Uint32(raw[164:]),
		uuidText:      cString(raw[168:208]),
	}
	copy(h.raw[:], raw)
	copy(h.mkDigest[:], raw[112:132])
	copy(h.mkDigestSalt[:], raw[132:164])
	for i := range h.slots {
		b := raw[luks1KeyblockBase+i*luks1KeyblockSize:]
		s := &h.slots[i]
		s.active = binary.BigEndian.Uint32(b)
		s.iterations = binary.BigEndian.Uint32(b[4:])
		copy(s.salt[:], b[8:40])
		s.offset = binary.BigEndian.Uint32(b[40:])
		s.stripes = binary.BigEndian.Uint32(b[44:])
	}
	return h
}

// keyAreaEnd is the end of the last keyslot area in sectors.
func (h *luks1Header) keyAreaEnd() uint64 {
	var end uint64
	for _, s := range h.slots {
		end = max(end, uint64(s.offset)+uint64(luks1AFSectors(h.keyBytes)))
	}
	return end
}

func (h *luks1Header) headerSize() int64 {
	if h.payloadOffset != 0 {
		return int64(h.payloadOffset) * 512
	}
	return int64(h.keyAreaEnd()) * 512
}

func (h *luks1Header) version() int { return 1 }

func (h *luks1Header) uuid() string { return h.uuidText }

func (h *luks1Header) spec() string { return h.cipherName + "-" + h.cipherMode }

func (h *luks1Header) usable() error {
	if err := safeCipher(h.spec()); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return nil
}

func (h *luks1Header) segment() (Segment, error) {
	if err := h.usable(); err != nil {
		return Segment{}, err
	}
	if _, err := dmcrypt.ParseSpec(h.spec()); err != nil {
		return Segment{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return Segment{Offset: int64(h.payloadOffset) * 512, Cipher: h.spec(), SectorSize: 512, KeySize: int(h.keyBytes)}, nil
}

func (h *luks1Header) activeKeyslots() []int {
	var ids []int
	for i, s := range h.slots {
		if s.active == luks1KeyEnabled {
			ids = append(ids, i)
		}
	}
	return ids
}

// unlock opens keyslot slot, or the first active one the passphrase
// opens. LUKS1 has no unbound keyslots: anyKey changes nothing.
func (h *luks1Header) unlock(dev io.ReaderAt, passphrase []byte, slot int, _ bool) ([]byte, int, error) {
	if err := h.usable(); err != nil {
		return nil, -1, err
	}
	newHash, err := hashFunc(h.hashSpec)
	if err != nil {
		return nil, -1, err
	}
	// Refuse ciphers dmcrypt cannot run before spending time on the KDF.
	sp, err := dmcrypt.ParseSpec(h.spec())
	if err == nil {
		err = sp.CheckKeySize(int(h.keyBytes))
	}
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	ids := h.activeKeyslots()
	if slot >= 0 {
		if slot >= luks1NumKeys || h.slots[slot].active != luks1KeyEnabled {
			return nil, -1, fmt.Errorf("keyslot %d is not active", slot)
		}
		ids = []int{slot}
	}
	for _, id := range ids {
		s := h.slots[id]
		key, err := pbkdf2.Key(newHash, string(passphrase), s.salt[:], int(s.iterations), int(h.keyBytes))
		if err != nil {
			return nil, -1, err
		}
		c, err := dmcrypt.New(h.spec(), key)
		clear(key)
		if err != nil {
			return nil, -1, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		buf := make([]byte, afSize(int(h.keyBytes), luks1Stripes))
		if _, err := dev.ReadAt(buf, int64(s.offset)*512); err != nil {
			c.Wipe()
			return nil, -1, fmt.Errorf("reading keyslot %d: %w", id, err)
		}
		c.Decrypt(buf, 0, areaSectorSize)
		c.Wipe()
		mk, err := afMerge(buf, int(h.keyBytes), luks1Stripes, newHash)
		clear(buf)
		if err != nil {
			return nil, -1, err
		}
		ok, err := h.checkVolumeKey(mk)
		if err != nil {
			clear(mk)
			return nil, -1, err
		}
		if ok {
			return mk, id, nil
		}
		clear(mk)
	}
	return nil, -1, ErrWrongPassphrase
}

// checkVolumeKey reports whether vk matches the header's volume key digest.
func (h *luks1Header) checkVolumeKey(vk []byte) (bool, error) {
	newHash, err := hashFunc(h.hashSpec)
	if err != nil {
		return false, err
	}
	if len(vk) != int(h.keyBytes) {
		return false, nil
	}
	sum, err := pbkdf2.Key(newHash, string(vk), h.mkDigestSalt[:], int(h.mkDigestIter), luks1DigestSize)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(sum, h.mkDigest[:]) == 1, nil
}

// dump prints luksDump's LUKS1 text, with the volume key when opts has
// one.
func (h *luks1Header) dump(w io.Writer, opts DumpOptions) error {
	if opts.VolumeKey != nil {
		return h.dumpVolumeKey(w, opts)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "LUKS header information for %s\n\n", opts.Device)
	fmt.Fprintf(&b, "Version:       \t%d\n", 1)
	fmt.Fprintf(&b, "Cipher name:   \t%s\n", h.cipherName)
	fmt.Fprintf(&b, "Cipher mode:   \t%s\n", h.cipherMode)
	fmt.Fprintf(&b, "Hash spec:     \t%s\n", h.hashSpec)
	fmt.Fprintf(&b, "Payload offset:\t%d\n", h.payloadOffset)
	fmt.Fprintf(&b, "MK bits:       \t%d\n", h.keyBytes*8)
	b.WriteString("MK digest:     \t")
	hexLine(&b, h.mkDigest[:], " ")
	hexHalves(&b, "\nMK salt:       \t", h.mkDigestSalt[:], "\n               \t")
	fmt.Fprintf(&b, "\nMK iterations: \t%d\n", h.mkDigestIter)
	fmt.Fprintf(&b, "UUID:          \t%s\n\n", h.uuidText)
	for i, s := range h.slots {
		if s.active != luks1KeyEnabled {
			fmt.Fprintf(&b, "Key Slot %d: DISABLED\n", i)
			continue
		}
		fmt.Fprintf(&b, "Key Slot %d: ENABLED\n", i)
		fmt.Fprintf(&b, "\tIterations:         \t%d\n", s.iterations)
		hexHalves(&b, "\tSalt:               \t", s.salt[:], "\n\t                      \t")
		fmt.Fprintf(&b, "\n\tKey material offset:\t%d\n", s.offset)
		fmt.Fprintf(&b, "\tAF stripes:            \t%d\n", s.stripes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dumpVolumeKey prints luksDump --dump-volume-key's text for LUKS1.
func (h *luks1Header) dumpVolumeKey(w io.Writer, opts DumpOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "LUKS header information for %s\n", opts.Device)
	fmt.Fprintf(&b, "Cipher name:   \t%s\n", h.cipherName)
	fmt.Fprintf(&b, "Cipher mode:   \t%s\n", h.cipherMode)
	fmt.Fprintf(&b, "Payload offset:\t%d\n", h.payloadOffset)
	fmt.Fprintf(&b, "UUID:          \t%s\n", h.uuidText)
	writeVolumeKey(&b, opts.VolumeKey, opts.KeyFile)
	_, err := io.WriteString(w, b.String())
	return err
}

// hexLine writes bytes as "%02x" followed by sep each.
func hexLine(b *strings.Builder, data []byte, sep string) {
	for _, c := range data {
		fmt.Fprintf(b, "%02x%s", c, sep)
	}
}

// hexHalves writes a 32-byte salt as luksDump does: label, the first 16
// bytes in hex, then cont and the other 16.
func hexHalves(b *strings.Builder, label string, salt []byte, cont string) {
	b.WriteString(label)
	hexLine(b, salt[:16], " ")
	b.WriteString(cont)
	hexLine(b, salt[16:], " ")
}

// writeVolumeKey prints the "MK bits" and "MK dump" lines (the latter
// saying where the key went when keyFile is set).
func writeVolumeKey(b *strings.Builder, vk []byte, keyFile string) {
	fmt.Fprintf(b, "MK bits:       \t%d\n", len(vk)*8)
	writeKey(b, "MK dump:\t", vk, keyFile)
}

// writeKey prints label and key in hex as luksDump does, 16 bytes a line,
// or, when keyFile is set, cryptsetup's line saying the key went there.
func writeKey(b *strings.Builder, label string, key []byte, keyFile string) {
	if keyFile != "" {
		fmt.Fprintf(b, "Key stored to file %s.\n", keyFile)
		return
	}
	b.WriteString(label)
	for i, c := range key {
		if i > 0 && i%16 == 0 {
			b.WriteString("\n\t\t")
		}
		fmt.Fprintf(b, "%02x ", c)
	}
	b.WriteString("\n")
}

// luks1Hash refuses a hash whose digest is shorter than LUKS1's 20-byte
// volume key digest (md5), as cryptsetup does on format and on load.
func luks1Hash(name string) error {
	if h, err := hashFunc(name); err == nil && h().Size() < luks1DigestSize {
		return fmt.Errorf("requested LUKS hash %s is not supported", name)
	}
	return nil
}
