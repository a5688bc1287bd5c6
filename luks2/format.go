package luks2

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"

	"github.com/luksd/luksd/dmcrypt"
)

// cryptsetup 2.6's keyslot defaults.
const (
	defaultStripes  = 4000
	keyslotSaltSize = 32
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

// Formatting a new volume as cryptsetup 2.6.1's luksFormat does, LUKS2 here
// and LUKS1 in luks1_format.go (the defaults and layouts are in layout.go):
// the options are checked and completed (plan), the header is built and
// validated with a new volume key (build), and only then is the device
// written: the header area zeroed, the keyslots area filled with noise,
// the key material, then the header.

func format(dev Device, size int64, opts FormatOptions, passphrase []byte) (*Header, []byte, error) {
	switch opts.Version {
	case 1:
		return formatLUKS1(dev, size, opts, passphrase)
	case 0, 2:
	default:
		return nil, nil, fmt.Errorf("%w: LUKS version %d", ErrUnsupported, opts.Version)
	}
	plan, err := planLUKS2(size, opts)
	if err != nil {
		return nil, nil, err
	}
	return withVolumeKey(plan.opts, func(vk []byte) (onDisk, error) {
		h, m, ks, err := plan.build(vk)
		if err != nil {
			return nil, err
		}
		return h, h.writeFormat(dev, m, ks, vk, passphrase, plan.areaEnd())
	})
}

// withVolumeKey makes a new volume key for opts and formats with it;
// where format fails the key is wiped.
func withVolumeKey(opts FormatOptions, format func(vk []byte) (onDisk, error)) (*Header, []byte, error) {
	vk, err := newVolumeKey(opts)
	if err != nil {
		return nil, nil, err
	}
	h, err := format(vk)
	if err != nil {
		clear(vk)
		return nil, nil, err
	}
	return &Header{impl: h}, vk, nil
}

// luks2Plan is a new LUKS2 volume's options, checked and completed with
// cryptsetup's defaults, and its layout.
type luks2Plan struct {
	opts         FormatOptions
	hdrSize      int64
	keyslotsSize uint64
	dataOffset   int64
}

// areaEnd is the end of what a format writes before the data.
func (pl *luks2Plan) areaEnd() int64 {
	return max(pl.dataOffset, 2*pl.hdrSize+int64(pl.keyslotsSize))
}

// planLUKS2 checks opts for a LUKS2 volume on a data device of size bytes
// (0: unknown) and fills in cipher, key size, sector size and UUID.
func planLUKS2(size int64, opts FormatOptions) (*luks2Plan, error) {
	spec, err := formatCipher(&opts)
	if err != nil {
		return nil, err
	}
	if opts.KeySize, err = volumeKeySize(spec, opts); err != nil {
		return nil, err
	}
	pl := &luks2Plan{}
	if pl.hdrSize, pl.keyslotsSize, pl.dataOffset, err = layout(opts); err != nil {
		return nil, err
	}
	if opts.SectorSize == 0 {
		opts.SectorSize = 512 // the size is unknown
		if size > 0 {
			opts.SectorSize = DefaultSectorSize(size, opts)
		}
	}
	if !ValidSectorSize(2, opts.SectorSize) {
		return nil, fmt.Errorf("unsupported encryption sector size %d", opts.SectorSize)
	}
	if pl.dataOffset%int64(opts.SectorSize) != 0 {
		return nil, fmt.Errorf("data offset %d is not aligned to the sector size %d", pl.dataOffset, opts.SectorSize)
	}
	if end := pl.areaEnd(); !opts.DetachedData && size > 0 && size <= end {
		return nil, fmt.Errorf("device is too small: %d bytes, the LUKS2 header needs more than %d", size, end)
	}
	if opts.UUID, err = formatUUID(opts.UUID); err != nil {
		return nil, err
	}
	opts.Label, opts.Subsystem = fitLabel(opts.Label), fitLabel(opts.Subsystem)
	pl.opts = opts
	return pl, nil
}

// build makes the new volume's header holding vk in its first keyslot:
// segment, digest and keyslot, validated as the metadata it will write.
// Nothing is written.
func (pl *luks2Plan) build(vk []byte) (*header, *metadata, keyslotParams, error) {
	opts := pl.opts
	p := opts.PBKDF
	if p.Hash == "" {
		p.Hash = opts.Hash
	}
	p = p.withDefaults()
	// cryptsetup 2.6 uses the PBKDF hash (--hash) for the digest and the
	// AF, whatever the keyslot's KDF.
	digestHash := strings.ToLower(p.Hash)
	slot := max(opts.Keyslot, 0)
	if slot >= maxKeyslots {
		return nil, nil, keyslotParams{}, fmt.Errorf("keyslot %d is out of range", slot)
	}
	dg, err := newDigestNode(vk, digestHash, digestIterations(p, digestHash, len(vk)), []int{slot}, []int{0})
	if err != nil {
		return nil, nil, keyslotParams{}, err
	}
	root := formatRoot(opts, pl.dataOffset, pl.hdrSize, pl.keyslotsSize, dg)
	h := &header{fresh: true, bin: binHeader{
		hdrSize:   pl.hdrSize,
		seqID:     2, // cryptsetup's luksFormat leaves epoch 3
		label:     opts.Label,
		csumAlg:   "sha256",
		uuid:      strings.ToLower(opts.UUID),
		subsystem: opts.Subsystem,
	}}
	if _, err := rand.Read(h.bin.salt[:]); err != nil {
		return nil, nil, keyslotParams{}, err
	}
	if _, err := rand.Read(h.salt2[:]); err != nil {
		return nil, nil, keyslotParams{}, err
	}
	h.meta = &metadata{root: root, keyslotsSize: pl.keyslotsSize, keyslots: map[int]*keyslot{}}
	ks, err := h.newKeyslot(vk, slot, p)
	if err != nil {
		return nil, nil, keyslotParams{}, err
	}
	root.get("keyslots").set(fmt.Sprint(slot), ks.node(len(vk)))
	m, err := h.prepare(root)
	return h, m, ks, err
}

// formatCipher fills in the default cipher and refuses one luksd cannot
// format with: unsafe (null, ECB) or not a dm-crypt spec it runs.
func formatCipher(opts *FormatOptions) (dmcrypt.Spec, error) {
	if opts.Cipher == "" {
		opts.Cipher = defaultCipher
	}
	if err := safeCipher(opts.Cipher); err != nil {
		return dmcrypt.Spec{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return dmcrypt.ParseSpec(opts.Cipher)
}

// formatUUID is the UUID a new volume gets: uuid, checked, or a random one.
func formatUUID(uuid string) (string, error) {
	if uuid == "" {
		return newUUID()
	}
	if !ValidUUID(uuid) {
		return "", fmt.Errorf("wrong LUKS UUID format provided: %q", uuid)
	}
	return uuid, nil
}

// newVolumeKey returns a copy of opts.VolumeKey, or a new random key of
// opts.KeySize bytes; the caller wipes it.
func newVolumeKey(opts FormatOptions) ([]byte, error) {
	if opts.VolumeKey != nil {
		return append([]byte(nil), opts.VolumeKey...), nil
	}
	vk := make([]byte, opts.KeySize)
	if _, err := rand.Read(vk); err != nil {
		return nil, err
	}
	return vk, nil
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
	cipher, areaKeySize, err := p.areaEncryption(cipher, areaKeySize)
	if err != nil {
		return keyslotParams{}, err
	}
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
// given volume key's, else the cipher's default (DefaultKeySize), checked
// against the cipher and the given key.
func volumeKeySize(spec dmcrypt.Spec, opts FormatOptions) (int, error) {
	n := opts.KeySize
	if n == 0 {
		n = len(opts.VolumeKey)
	}
	if n == 0 {
		n = DefaultKeySize(spec.String())
	}
	if err := spec.CheckKeySize(n); err != nil {
		return 0, err
	}
	if opts.VolumeKey != nil && len(opts.VolumeKey) != n {
		return 0, fmt.Errorf("volume key has %d bytes, the key size is %d", len(opts.VolumeKey), n)
	}
	return n, nil
}
