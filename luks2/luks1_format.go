package luks2

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// cryptsetup 2.6.1's LUKS1 layout: keyslot areas start at 4 KiB, each
// rounded up to 4 KiB; the payload starts at the next 1 MiB boundary.
const (
	luks1AreaAlign    = 8    // sectors
	luks1PayloadAlign = 2048 // sectors
)

// luks1Layout returns the key material offsets, the end of the header
// (the last keyslot area, each rounded up to 4 KiB) and the payload offset
// (sectors) for a keyBytes-byte volume key: the header's end rounded up to
// align sectors (0: 1 MiB), as cryptsetup places it.
func luks1Layout(keyBytes int, align uint32) (offsets [luks1NumKeys]uint32, end, payload uint32) {
	stride := (luks1AFSectors(uint32(keyBytes)) + luks1AreaAlign - 1) / luks1AreaAlign * luks1AreaAlign
	for i := range offsets {
		offsets[i] = luks1AreaAlign + uint32(i)*stride
	}
	if align == 0 {
		align = luks1PayloadAlign
	}
	end = offsets[luks1NumKeys-1] + stride
	return offsets, end, (end + align - 1) / align * align
}

// ErrLUKS1DataOffset: a LUKS1 payload offset inside the header (cryptsetup:
// "Data offset for LUKS header must be either 0 or higher than header
// size.").
var ErrLUKS1DataOffset = errors.New("data offset for LUKS header must be either 0 or higher than header size")

// formatLUKS1 writes a LUKS1 header as cryptsetup's luksFormat --type luks1
// does: the header area zeroed, every keyslot area filled with random
// bytes, the header with all keyslots disabled, then the passphrase's
// keyslot (PBKDF2 with the header's hash).
func formatLUKS1(dev Device, size int64, opts FormatOptions, passphrase []byte) (*Header, []byte, error) {
	if opts.Cipher == "" {
		opts.Cipher = "aes-xts-plain64"
	}
	if err := safeCipher(opts.Cipher); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	spec, err := dmcrypt.ParseSpec(opts.Cipher)
	if err != nil {
		return nil, nil, err
	}
	cipherName, cipherMode, _ := strings.Cut(opts.Cipher, "-")
	if len(cipherName) >= 32 || len(cipherMode) >= 32 {
		return nil, nil, fmt.Errorf("cipher %q does not fit a LUKS1 header", opts.Cipher)
	}
	switch {
	case opts.SectorSize != 0 && opts.SectorSize != 512:
		return nil, nil, fmt.Errorf("%w: LUKS1 has 512-byte sectors only", ErrUnsupported)
	case opts.Label != "" || opts.Subsystem != "":
		return nil, nil, fmt.Errorf("%w: LUKS1 has no label or subsystem", ErrUnsupported)
	case opts.MetadataSize != 0 || opts.KeyslotsSize != 0:
		return nil, nil, fmt.Errorf("%w: LUKS1 has no metadata or keyslots area sizes", ErrUnsupported)
	case opts.Keyslot >= luks1NumKeys:
		return nil, nil, fmt.Errorf("keyslot %d is out of range", opts.Keyslot)
	case opts.DataOffset%512 != 0:
		return nil, nil, fmt.Errorf("data offset %d is not a multiple of 512 bytes", opts.DataOffset)
	case opts.PayloadAlign < 0 || opts.PayloadAlign%512 != 0 || opts.PayloadAlign/512 > 1<<31:
		return nil, nil, fmt.Errorf("payload alignment %d is not a multiple of 512 bytes", opts.PayloadAlign)
	case opts.PayloadAlign != 0 && (opts.DataOffset != 0 || opts.DetachedData):
		return nil, nil, fmt.Errorf("payload alignment and data offset cannot be combined")
	}
	p := opts.PBKDF
	if p.Type != "" && p.Type != "pbkdf2" {
		return nil, nil, ErrLUKS1PBKDF
	}
	if p.Iterations > 0 && p.Iterations < minPBKDF2Iterations {
		// Refused before anything is written, not by the keyslot after.
		return nil, nil, fmt.Errorf("forced iteration count is too low for pbkdf2 (minimum is %d)", minPBKDF2Iterations)
	}
	hash := strings.ToLower(opts.Hash)
	if hash == "" {
		hash = strings.ToLower(p.Hash)
	}
	if hash == "" {
		hash = "sha256"
	}
	newHash, err := hashFunc(hash)
	if err == nil {
		err = luks1Hash(hash)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(hash) >= 32 {
		return nil, nil, fmt.Errorf("hash %q does not fit a LUKS1 header", hash)
	}
	if opts.KeySize, err = volumeKeySize(spec, opts); err != nil {
		return nil, nil, err
	}
	offsets, hdrEnd, payload := luks1Layout(opts.KeySize, uint32(opts.PayloadAlign/512))
	if opts.DataOffset != 0 || opts.DetachedData {
		payload = uint32(opts.DataOffset / 512)
		if payload != 0 && payload < hdrEnd {
			return nil, nil, fmt.Errorf("%w (%d bytes)", ErrLUKS1DataOffset, int64(hdrEnd)*512)
		}
	}
	// The header area ends with the last keyslot's 4 KiB-aligned area: a
	// detached header file has that size.
	areaEnd := max(int64(payload), int64(hdrEnd)) * 512
	if !opts.DetachedData && size > 0 && size <= areaEnd {
		return nil, nil, fmt.Errorf("device is too small: %d bytes, the LUKS1 header needs more than %d", size, areaEnd)
	}
	if opts.UUID == "" {
		if opts.UUID, err = newUUID(); err != nil {
			return nil, nil, err
		}
	} else if !uuidPattern.MatchString(opts.UUID) {
		return nil, nil, fmt.Errorf("wrong LUKS UUID format provided: %q", opts.UUID)
	}
	vk := make([]byte, opts.KeySize)
	if opts.VolumeKey != nil {
		copy(vk, opts.VolumeKey)
	} else if _, err := rand.Read(vk); err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*Header, []byte, error) {
		clear(vk)
		return nil, nil, err
	}

	raw := make([]byte, luks1HeaderSize)
	copy(raw, magic1)
	binary.BigEndian.PutUint16(raw[offVersion:], 1)
	copy(raw[8:40], cipherName)
	copy(raw[40:72], cipherMode)
	copy(raw[72:104], hash)
	binary.BigEndian.PutUint32(raw[104:], payload)
	binary.BigEndian.PutUint32(raw[108:], uint32(opts.KeySize))
	salt := raw[132:164]
	if _, err := rand.Read(salt); err != nil {
		return fail(err)
	}
	iter := digestIterations(p, hash, opts.KeySize)
	sum, err := pbkdf2.Key(newHash, string(vk), salt, iter, luks1DigestSize)
	if err != nil {
		return fail(err)
	}
	copy(raw[112:132], sum)
	binary.BigEndian.PutUint32(raw[164:], uint32(iter))
	copy(raw[168:207], strings.ToLower(opts.UUID))
	for i, off := range offsets {
		b := raw[luks1KeyblockBase+i*luks1KeyblockSize:]
		binary.BigEndian.PutUint32(b, luks1KeyDisabled)
		binary.BigEndian.PutUint32(b[40:], off)
		binary.BigEndian.PutUint32(b[44:], luks1Stripes)
	}
	next, err := readLUKS1(bytes.NewReader(raw), 0)
	if err != nil {
		return fail(fmt.Errorf("refusing to write: %w", err))
	}
	slot := max(opts.Keyslot, 0)
	material, err := next.seal(slot, vk, passphrase, p)
	if err != nil {
		return fail(err)
	}
	defer clear(material)

	h := &luks1Header{fresh: true}
	if err := h.writeFormat(dev, next, slot, material, areaEnd); err != nil {
		return fail(err)
	}
	return &Header{impl: h}, vk, nil
}

// writeFormat writes the new volume next: the header area up to end
// zeroed, every keyslot area filled with noise, keyslot slot's material,
// then the header. Unlike cryptsetup, which writes a header without
// keyslots and then adds one, the header goes out once, after the key
// material it names is durable: a power cut never leaves a header no
// passphrase opens.
func (h *luks1Header) writeFormat(dev Device, next *luks1Header, slot int, material []byte, end int64) error {
	if err := zeroRange(dev, 0, end); err != nil {
		return err
	}
	n := uint64(afSize(int(next.keyBytes), luks1Stripes))
	for _, s := range next.slots {
		if err := wipeArea(dev, uint64(s.offset)*512, n); err != nil {
			return err
		}
	}
	if err := next.writeMaterial(dev, slot, material); err != nil {
		return err
	}
	return h.store(dev, next)
}
