package luks2

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
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
	pl, err := planLUKS1(opts)
	if err != nil {
		return nil, nil, err
	}
	if !pl.opts.DetachedData && size > 0 && size <= pl.areaEnd {
		return nil, nil, fmt.Errorf("device is too small: %d bytes, the LUKS1 header needs more than %d", size, pl.areaEnd)
	}
	if pl.opts.UUID, err = formatUUID(pl.opts.UUID); err != nil {
		return nil, nil, err
	}
	return withVolumeKey(pl.opts, func(vk []byte) (onDisk, error) {
		return pl.write(dev, vk, passphrase)
	})
}

// luks1Plan is a new LUKS1 volume's options, checked and completed with
// cryptsetup's defaults, and its layout (in 512-byte sectors).
type luks1Plan struct {
	opts                   FormatOptions
	cipherName, cipherMode string
	hash                   string
	offsets                [luks1NumKeys]uint32 // key material
	hdrEnd, payload        uint32
	areaEnd                int64 // bytes a format writes before the payload
}

// planLUKS1 checks opts for a LUKS1 volume as cryptsetup 2.6.1 does and
// lays it out: keyslot areas from 4 KiB, each rounded up to 4 KiB, the
// payload at DataOffset or at the end of the last area rounded up to
// PayloadAlign (1 MiB by default). With DetachedData, PayloadAlign is the
// payload offset itself, as cryptsetup takes --align-payload then.
func planLUKS1(opts FormatOptions) (*luks1Plan, error) {
	if opts.DetachedData && opts.PayloadAlign != 0 && opts.DataOffset == 0 {
		opts.DataOffset, opts.PayloadAlign = opts.PayloadAlign, 0
	}
	spec, err := formatCipher(&opts)
	if err != nil {
		return nil, err
	}
	pl := &luks1Plan{}
	pl.cipherName, pl.cipherMode, _ = strings.Cut(opts.Cipher, "-")
	if len(pl.cipherName) >= 32 || len(pl.cipherMode) >= 32 {
		return nil, fmt.Errorf("cipher %q does not fit a LUKS1 header", opts.Cipher)
	}
	if err := checkLUKS1Options(opts); err != nil {
		return nil, err
	}
	if pl.hash, err = luks1FormatHash(opts); err != nil {
		return nil, err
	}
	if opts.KeySize, err = volumeKeySize(spec, opts); err != nil {
		return nil, err
	}
	pl.offsets, pl.hdrEnd, pl.payload = luks1Layout(opts.KeySize, uint32(opts.PayloadAlign/512))
	if opts.DataOffset != 0 || opts.DetachedData {
		pl.payload = uint32(opts.DataOffset / 512)
		if pl.payload != 0 && pl.payload < pl.hdrEnd {
			return nil, fmt.Errorf("%w (%d bytes)", ErrLUKS1DataOffset, int64(pl.hdrEnd)*512)
		}
	}
	// The header area ends with the last keyslot's 4 KiB-aligned area: a
	// detached header file has that size.
	pl.areaEnd = max(int64(pl.payload), int64(pl.hdrEnd)) * 512
	pl.opts = opts
	return pl, nil
}

// checkLUKS1Options refuses what a LUKS1 header cannot hold and PBKDFs
// other than PBKDF2, before anything is written.
func checkLUKS1Options(opts FormatOptions) error {
	switch {
	case opts.SectorSize != 0 && !ValidSectorSize(1, opts.SectorSize):
		return fmt.Errorf("%w: LUKS1 has 512-byte sectors only", ErrUnsupported)
	case opts.Label != "" || opts.Subsystem != "":
		return fmt.Errorf("%w: LUKS1 has no label or subsystem", ErrUnsupported)
	case opts.MetadataSize != 0 || opts.KeyslotsSize != 0:
		return fmt.Errorf("%w: LUKS1 has no metadata or keyslots area sizes", ErrUnsupported)
	case opts.Keyslot >= luks1NumKeys:
		return fmt.Errorf("keyslot %d is out of range", opts.Keyslot)
	case opts.DataOffset%512 != 0:
		return fmt.Errorf("data offset %d is not a multiple of 512 bytes", opts.DataOffset)
	case opts.PayloadAlign < 0 || opts.PayloadAlign%512 != 0 || opts.PayloadAlign/512 > 1<<31:
		return fmt.Errorf("payload alignment %d is not a multiple of 512 bytes", opts.PayloadAlign)
	case opts.PayloadAlign != 0 && (opts.DataOffset != 0 || opts.DetachedData):
		return fmt.Errorf("payload alignment and data offset cannot be combined")
	}
	// Refused before anything is written, not by the keyslot after.
	return CheckPBKDF(opts.PBKDF, 1)
}

// luks1FormatHash is the hash of a new LUKS1 header: --hash, else the
// PBKDF's, else sha256; one LUKS1 can hold (a digest of at least 20 bytes,
// a name under 32).
func luks1FormatHash(opts FormatOptions) (string, error) {
	hash := strings.ToLower(opts.Hash)
	if hash == "" {
		hash = strings.ToLower(opts.PBKDF.Hash)
	}
	if hash == "" {
		hash = "sha256"
	}
	_, err := hashFunc(hash)
	if err == nil {
		err = luks1Hash(hash)
	}
	if err != nil {
		return "", err
	}
	if len(hash) >= 32 {
		return "", fmt.Errorf("hash %q does not fit a LUKS1 header", hash)
	}
	return hash, nil
}

// write builds the new header for vk (its digest, every keyslot disabled
// at its place), validates it, seals vk for passphrase into the first
// keyslot and writes the volume.
func (pl *luks1Plan) write(dev Device, vk, passphrase []byte) (*luks1Header, error) {
	raw, err := pl.header(vk)
	if err != nil {
		return nil, err
	}
	next, err := readLUKS1(bytes.NewReader(raw), 0)
	if err != nil {
		return nil, fmt.Errorf("refusing to write: %w", err)
	}
	slot := max(pl.opts.Keyslot, 0)
	material, err := next.seal(slot, vk, passphrase, pl.opts.PBKDF)
	if err != nil {
		return nil, err
	}
	defer clear(material)
	h := &luks1Header{fresh: true}
	if err := h.writeFormat(dev, next, slot, material, pl.areaEnd); err != nil {
		return nil, err
	}
	return h, nil
}

// header encodes the new 592-byte header: cipher, hash, payload, key
// size, the digest of vk, the UUID and eight disabled keyslots.
func (pl *luks1Plan) header(vk []byte) ([]byte, error) {
	raw := make([]byte, luks1HeaderSize)
	copy(raw, magic1)
	binary.BigEndian.PutUint16(raw[offVersion:], 1)
	copy(raw[8:40], pl.cipherName)
	copy(raw[40:72], pl.cipherMode)
	copy(raw[72:104], pl.hash)
	binary.BigEndian.PutUint32(raw[104:], pl.payload)
	binary.BigEndian.PutUint32(raw[108:], uint32(pl.opts.KeySize))
	salt := raw[132:164]
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	newHash, err := hashFunc(pl.hash)
	if err != nil {
		return nil, err
	}
	iter := digestIterations(pl.opts.PBKDF, pl.hash, pl.opts.KeySize)
	sum, err := pbkdf2.Key(newHash, string(vk), salt, iter, luks1DigestSize)
	if err != nil {
		return nil, err
	}
	copy(raw[112:132], sum)
	binary.BigEndian.PutUint32(raw[164:], uint32(iter))
	copy(raw[168:207], strings.ToLower(pl.opts.UUID))
	for i, off := range pl.offsets {
		b := raw[luks1KeyblockBase+i*luks1KeyblockSize:]
		binary.BigEndian.PutUint32(b, luks1KeyDisabled)
		binary.BigEndian.PutUint32(b[40:], off)
		binary.BigEndian.PutUint32(b[44:], luks1Stripes)
	}
	return raw, nil
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
