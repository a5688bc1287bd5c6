package luks2

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// cryptsetup 2.6's LUKS2 layout defaults.
const (
	defaultMetadataSize = 16 << 10
	defaultDataOffset   = 16 << 20
	dataAlignment       = 1 << 20
	defaultStripes      = 4000
	keyslotSaltSize     = 32
)

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidUUID reports whether s is a UUID Format and SetUUID take: the
// canonical textual form, in either case.
func ValidUUID(s string) bool { return uuidPattern.MatchString(s) }

func newUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:]), nil
}

// keyslotAreaSize is the AF material rounded up to 4096 bytes.
func keyslotAreaSize(keySize int) uint64 {
	n := uint64(afSize(keySize, defaultStripes))
	return (n + keyslotsAlign - 1) / keyslotsAlign * keyslotsAlign
}

// layout computes hdr_size, keyslots_size and the data offset.
func layout(opts FormatOptions) (hdrSize int64, keyslotsSize uint64, dataOffset int64, err error) {
	hdrSize = opts.MetadataSize
	if hdrSize == 0 {
		hdrSize = defaultMetadataSize
	}
	if !validHdrSize(hdrSize) {
		return 0, 0, 0, fmt.Errorf("unsupported LUKS2 metadata size %d", hdrSize)
	}
	meta := 2 * hdrSize
	dataOffset = opts.DataOffset
	switch {
	case opts.KeyslotsSize > 0:
		keyslotsSize = uint64(opts.KeyslotsSize)
		if dataOffset == 0 && !opts.DetachedData {
			dataOffset = (meta + opts.KeyslotsSize + dataAlignment - 1) / dataAlignment * dataAlignment
		}
	case dataOffset > 0 && !opts.DetachedData:
		if dataOffset < meta {
			return 0, 0, 0, fmt.Errorf("data offset %d is inside the %d-byte metadata area", dataOffset, meta)
		}
		keyslotsSize = uint64(min(dataOffset-meta, maxKeyslotsSize)) / keyslotsAlign * keyslotsAlign
	default:
		keyslotsSize = uint64(defaultDataOffset - meta)
		if !opts.DetachedData {
			dataOffset = defaultDataOffset
		}
	}
	if keyslotsSize == 0 || keyslotsSize%keyslotsAlign != 0 || keyslotsSize > maxKeyslotsSize {
		return 0, 0, 0, fmt.Errorf("invalid keyslots area size %d (4 KiB aligned, at most 128 MiB)", keyslotsSize)
	}
	if dataOffset != 0 && dataOffset < meta+int64(keyslotsSize) {
		return 0, 0, 0, fmt.Errorf("data offset %d overlaps the %d-byte header area", dataOffset, meta+int64(keyslotsSize))
	}
	return hdrSize, keyslotsSize, dataOffset, nil
}

func format(dev Device, size int64, opts FormatOptions, passphrase []byte) (*Header, []byte, error) {
	switch opts.Version {
	case 1:
		return formatLUKS1(dev, size, opts, passphrase)
	case 0, 2:
	default:
		return nil, nil, fmt.Errorf("%w: LUKS version %d", ErrUnsupported, opts.Version)
	}
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
	if opts.KeySize, err = volumeKeySize(spec, opts); err != nil {
		return nil, nil, err
	}
	hdrSize, keyslotsSize, dataOffset, err := layout(opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.SectorSize == 0 {
		opts.SectorSize = defaultSectorSize(size, opts.DataOffset, dataOffset)
	}
	if s := opts.SectorSize; s < 512 || s > 4096 || s&(s-1) != 0 {
		return nil, nil, fmt.Errorf("unsupported encryption sector size %d", s)
	}
	if dataOffset%int64(opts.SectorSize) != 0 {
		return nil, nil, fmt.Errorf("data offset %d is not aligned to the sector size %d", dataOffset, opts.SectorSize)
	}
	areaEnd := 2*hdrSize + int64(keyslotsSize)
	if !opts.DetachedData && size > 0 && size <= max(dataOffset, areaEnd) {
		return nil, nil, fmt.Errorf("device is too small: %d bytes, the LUKS2 header needs more than %d", size, max(dataOffset, areaEnd))
	}
	if opts.UUID == "" {
		if opts.UUID, err = newUUID(); err != nil {
			return nil, nil, err
		}
	} else if !uuidPattern.MatchString(opts.UUID) {
		return nil, nil, fmt.Errorf("wrong LUKS UUID format provided: %q", opts.UUID)
	}
	opts.Label, opts.Subsystem = fitLabel(opts.Label), fitLabel(opts.Subsystem)
	vk := opts.VolumeKey
	if vk == nil {
		vk = make([]byte, opts.KeySize)
		if _, err := rand.Read(vk); err != nil {
			return nil, nil, err
		}
	} else {
		vk = append([]byte(nil), vk...)
	}
	fail := func(err error) (*Header, []byte, error) {
		clear(vk)
		return nil, nil, err
	}

	p := opts.PBKDF
	if p.Hash == "" {
		p.Hash = opts.Hash
	}
	p = p.withDefaults()
	// cryptsetup 2.6 uses the PBKDF hash (--hash) for the digest and the
	// AF, whatever the keyslot's KDF.
	digestHash := strings.ToLower(p.Hash)
	slot := opts.Keyslot
	if slot < 0 {
		slot = 0
	}
	if slot >= maxKeyslots {
		return fail(fmt.Errorf("keyslot %d is out of range", slot))
	}

	dg, err := newDigestNode(vk, digestHash, digestIterations(p, digestHash, len(vk)), []int{slot}, []int{0})
	if err != nil {
		return fail(err)
	}
	root := formatRoot(opts, dataOffset, hdrSize, keyslotsSize, dg)
	h := &header{fresh: true, bin: binHeader{
		hdrSize:   hdrSize,
		seqID:     2, // cryptsetup's luksFormat leaves epoch 3
		label:     opts.Label,
		csumAlg:   "sha256",
		uuid:      strings.ToLower(opts.UUID),
		subsystem: opts.Subsystem,
	}}
	if _, err := rand.Read(h.bin.salt[:]); err != nil {
		return fail(err)
	}
	if _, err := rand.Read(h.salt2[:]); err != nil {
		return fail(err)
	}
	h.meta = &metadata{root: root, keyslotsSize: keyslotsSize, keyslots: map[int]*keyslot{}}
	ks, err := h.newKeyslot(vk, slot, p)
	if err != nil {
		return fail(err)
	}
	root.get("keyslots").set(fmt.Sprint(slot), ks.node(len(vk)))
	m, err := h.prepare(root)
	if err != nil {
		return fail(err)
	}
	// The header is built and valid; only now is the device written.
	if err := h.writeFormat(dev, m, ks, vk, passphrase, max(dataOffset, areaEnd)); err != nil {
		return fail(err)
	}
	return &Header{impl: h}, vk, nil
}

// formatRoot is a new volume's metadata: one crypt segment, its digest dg,
// no keyslot yet.
func formatRoot(opts FormatOptions, dataOffset, hdrSize int64, keyslotsSize uint64, dg *node) *node {
	return obj(
		"keyslots", jObject(),
		"tokens", jObject(),
		"segments", obj("0", obj(
			"type", jString("crypt"),
			"offset", jUint64Str(uint64(dataOffset)),
			"size", jString("dynamic"),
			"iv_tweak", jString("0"),
			"encryption", jString(opts.Cipher),
			"sector_size", jInt(int64(opts.SectorSize)))),
		"digests", obj("0", dg),
		"config", obj(
			"json_size", jUint64Str(uint64(hdrSize-binHeaderSize)),
			"keyslots_size", jUint64Str(keyslotsSize)),
	)
}

// writeFormat writes a new volume whose header h will hold m: the header
// area up to end zeroed, the keyslots area filled with noise, the key
// material of keyslot ks, then (flushed first) both header copies.
func (h *header) writeFormat(dev Device, m *metadata, ks keyslotParams, vk, passphrase []byte, end int64) error {
	if err := zeroRange(dev, 0, end); err != nil {
		return err
	}
	if err := wipeArea(dev, uint64(2*h.bin.hdrSize), m.keyslotsSize); err != nil {
		return err
	}
	if err := ks.writeMaterial(dev, vk, passphrase); err != nil {
		return err
	}
	return h.install(dev, m)
}

// defaultSectorSize picks the encryption sector size as cryptsetup 2.6.1
// does for an image file: 4096, reverted to 512 when an explicit data offset
// counted in 512-byte sectors is not a multiple of 4096 (2.6.1 compares the
// sector count, not bytes), or when the data area is not a multiple of 4096.
func defaultSectorSize(size, requestedOffset, dataOffset int64) int {
	if size <= 0 {
		return 512
	}
	if requestedOffset != 0 && (requestedOffset/512)%4096 != 0 {
		return 512
	}
	if (size-dataOffset)%4096 != 0 {
		return 512
	}
	return 4096
}

// newKeyslot places a new keyslot for a vk-sized key and picks its KDF
// parameters; nothing is written yet.
func (h *header) newKeyslot(vk []byte, slot int, p PBKDF) (keyslotParams, error) {
	s, err := h.meta.dataSegment()
	var cipher string
	if err == nil {
		cipher = s.cipher
	} else if seg := h.meta.root.get("segments").get("0"); seg != nil {
		cipher = seg.get("encryption").str
	}
	if cipher == "" || strings.HasPrefix(cipher, "capi:") || safeCipher(cipher) != nil {
		return keyslotParams{}, fmt.Errorf("%w: no usable keyslot cipher (segment cipher %q)", ErrUnsupported, cipher)
	}
	// The area key is as long as the volume key of the data segment, also
	// for an unbound key of another size (cryptsetup's default).
	areaKeySize := len(vk)
	if n := h.segmentKeySize(); n > 0 {
		areaKeySize = n
	}
	return h.newKeyslotIn(len(vk), slot, p, cipher, areaKeySize)
}

// newKeyslotIn is newKeyslot with the area's cipher and key size given.
func (h *header) newKeyslotIn(keySize, slot int, p PBKDF, cipher string, areaKeySize int) (keyslotParams, error) {
	p = p.forKeyslot()
	areaSize := keyslotAreaSize(keySize)
	off, err := h.areaGap(areaSize)
	if err != nil {
		return keyslotParams{}, err
	}
	salt := make([]byte, keyslotSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return keyslotParams{}, err
	}
	kp, err := p.params(salt, keySize)
	if err != nil {
		return keyslotParams{}, err
	}
	return keyslotParams{
		id: slot, areaOffset: off, areaSize: areaSize,
		areaCipher: cipher, areaKeySize: areaKeySize,
		afHash: strings.ToLower(p.Hash), stripes: defaultStripes, kdf: kp,
	}, nil
}

func zeroRange(dev Device, off, end int64) error {
	buf := make([]byte, 1<<20)
	for off < end {
		n := min(int64(len(buf)), end-off)
		if _, err := dev.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("wiping the header area: %w", err)
		}
		off += n
	}
	return nil
}

// volumeKeySize is the volume key size a format uses: --key-size, else the
// given volume key's, else the cipher's default (512 bits for XTS, 256
// otherwise), checked against the cipher and the given key.
func volumeKeySize(spec dmcrypt.Spec, opts FormatOptions) (int, error) {
	n := opts.KeySize
	if n == 0 {
		n = len(opts.VolumeKey)
	}
	if n == 0 {
		n = 32
		if spec.Mode == "xts" {
			n = 64
		}
	}
	if err := spec.CheckKeySize(n); err != nil {
		return 0, err
	}
	if opts.VolumeKey != nil && len(opts.VolumeKey) != n {
		return 0, fmt.Errorf("volume key has %d bytes, the key size is %d", len(opts.VolumeKey), n)
	}
	return n, nil
}
