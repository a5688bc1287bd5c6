package luks2

import (
	"errors"
	"fmt"
	"strings"
)

// What Format picks when it is not told, and where it puts a new header's
// parts: cryptsetup 2.6.1's luksFormat defaults and limits, as questions
// a caller can ask before it formats.

// cryptsetup 2.6's LUKS2 layout defaults.
const (
	defaultCipher       = "aes-xts-plain64"
	defaultMetadataSize = 16 << 10
	defaultDataOffset   = 16 << 20
	dataAlignment       = 1 << 20
	// smallKeyslotsArea: cryptsetup warns about a keyslots area smaller
	// than the largest header copy less the two smallest ones.
	smallKeyslotsArea = maxHdrSize - 2*defaultMetadataSize
	// offsetAlignment: a data offset asked for is a multiple of it.
	offsetAlignment = 4096
)

// Layout is where Format puts a new volume's parts, in bytes.
type Layout struct {
	MetadataSize int64 // LUKS2: one header copy, binary header and JSON area
	KeyslotsSize int64 // LUKS2: the keyslots area after both copies
	DataOffset   int64 // where the data segment starts (LUKS1: the payload)
}

// SmallKeyslotsArea reports whether cryptsetup warns that the LUKS2
// keyslots area "is very small, available LUKS2 keyslot count is very
// limited" (under 4 MiB less 32 KiB).
func (l Layout) SmallKeyslotsArea() bool {
	return l.KeyslotsSize > 0 && l.KeyslotsSize < smallKeyslotsArea
}

// FormatLayout returns the layout Format gives a volume for opts, or the
// error it refuses them with. LUKS1 layouts have a DataOffset only.
func FormatLayout(opts FormatOptions) (Layout, error) {
	if opts.Version == 1 {
		p, err := planLUKS1(opts)
		if err != nil {
			return Layout{}, err
		}
		return Layout{DataOffset: int64(p.payload) * 512}, nil
	}
	hdrSize, keyslotsSize, dataOffset, err := layout(opts)
	return Layout{MetadataSize: hdrSize, KeyslotsSize: int64(keyslotsSize), DataOffset: dataOffset}, err
}

// layout computes a new LUKS2 header's hdr_size, keyslots_size and data
// offset.
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
	case opts.PayloadAlign != 0:
		if opts.PayloadAlign < 0 || dataOffset != 0 || opts.DetachedData || opts.MetadataSize != 0 || opts.KeyslotsSize != 0 {
			return 0, 0, 0, errors.New("payload alignment takes the default LUKS2 layout only")
		}
		// The default data offset rounded up to the alignment, with the
		// default keyslots area (cryptsetup does not grow it).
		keyslotsSize = uint64(defaultDataOffset - meta)
		dataOffset = (defaultDataOffset + opts.PayloadAlign - 1) / opts.PayloadAlign * opts.PayloadAlign
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

// keyslotAreaSize is the AF material rounded up to 4096 bytes.
func keyslotAreaSize(keySize int) uint64 {
	n := uint64(afSize(keySize, defaultStripes))
	return (n + keyslotsAlign - 1) / keyslotsAlign * keyslotsAlign
}

// DefaultKeySize is the volume key size in bytes Format uses for cipher
// ("" for the default aes-xts-plain64) when none is asked for: 64 (512
// bits) for XTS, which splits it into two keys, 32 otherwise.
func DefaultKeySize(cipher string) int {
	if cipher == "" {
		cipher = defaultCipher
	}
	_, rest, _ := strings.Cut(cipher, "-")
	if mode, _, _ := strings.Cut(rest, "-"); mode == "xts" {
		return 64
	}
	return 32
}

// ValidSectorSize reports whether n bytes is an encryption sector size a
// header of LUKS version can have: 512 for LUKS1; for LUKS2 a power of
// two from 512 to 4096, as dm-crypt takes.
func ValidSectorSize(version, n int) bool {
	if version == 1 {
		return n == 512
	}
	return n >= 512 && n <= 4096 && n&(n-1) == 0
}

// DefaultSectorSize is the encryption sector size Format picks for a
// volume of size bytes (the data device's) when opts has none, as
// cryptsetup 2.6.1 picks it for an image file: 4096, reverted to 512 when
// an explicit data offset counted in 512-byte sectors is not a multiple of
// 4096 (2.6.1 compares the sector count, not bytes), or when the data area
// is not a multiple of 4096. LUKS1: 512.
//
// Format itself takes a size of 0 as unknown and picks 512; a caller that
// formats an image file smaller than the data offset (which then grows)
// asks here with the file's size and passes the answer in opts.
func DefaultSectorSize(size int64, opts FormatOptions) int {
	if opts.Version == 1 {
		return 512
	}
	if opts.DataOffset != 0 && (opts.DataOffset/512)%4096 != 0 {
		return 512
	}
	if size == 0 && opts.PayloadAlign != 0 {
		// An empty image file with an alignment: 512, as luksd has always
		// picked (cryptsetup refuses to format an empty device at all).
		return 512
	}
	l, err := FormatLayout(opts)
	if err != nil || (size-l.DataOffset)%4096 != 0 {
		return 512
	}
	return 4096
}

// DataOffsetAligned reports whether a data offset asked for on the device
// that holds the header is one cryptsetup's luksFormat takes: a multiple
// of 4096 bytes ("Data offset is not multiple of 4096 bytes.").
func DataOffsetAligned(off int64) bool { return off%offsetAlignment == 0 }
