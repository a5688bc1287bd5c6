package luks2

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/luksd/luksd/dmcrypt"
)

// Converting a header in place between LUKS1 and LUKS2 as cryptsetup
// 2.6.1's convert does (lib/luks2/luks2_luks1_convert.c): LUKS1 -> LUKS2
// here, LUKS2 -> LUKS1 in convert_luks1.go. The keyslots keep their
// passphrases: their key material moves as it is, by the difference
// between LUKS1's first keyslot (4 KiB) and LUKS2's keyslots area (32 KiB
// after two 16 KiB header copies), and the new header describes it with
// the same salts and iterations. Every check runs before anything is
// written; the JSON metadata is the very one cryptsetup writes.
//
// Like cryptsetup's, a conversion is not atomic: from the first byte of
// key material moved until the new header is written, neither format
// describes the device. The move copies in chunks no longer than the shift
// in the direction that never overwrites bytes not yet copied, and is
// flushed before the new header is written.

// convertShift is how far the keyslot material moves: 2 * 16 KiB - 4 KiB.
const convertShift = 2*hdrSize16K - luks1AlignKeyslots

const (
	hdrSize16K         = 16 << 10
	luks1AlignKeyslots = 4096
	luks1HeaderWrite   = 1024 // struct luks_phdr with its padding
)

// ConvertError: cryptsetup refuses the conversion with Msg ("" where it
// says nothing but fails). Nothing was written.
type ConvertError struct{ Msg string }

func (e *ConvertError) Error() string {
	if e.Msg == "" {
		return "conversion refused"
	}
	return e.Msg
}

func refuse(format string, a ...any) error { return &ConvertError{Msg: fmt.Sprintf(format, a...)} }

// ErrConvertInUse: the volume is active (cryptsetup's "Cannot convert
// device X which is still in use.", exit 5). Nothing was written.
var ErrConvertInUse = errors.New("device is still in use")

// ErrMoveFailed: the keyslot material could not be moved (cryptsetup's
// "Unable to move keyslot area.").
var ErrMoveFailed = errors.New("unable to move keyslot area")

// ConvertOptions are a conversion's questions to its caller.
type ConvertOptions struct {
	// InUse reports whether a volume with the header's UUID is active
	// (typ "LUKS1" or "LUKS2", the header's type before the conversion).
	InUse func(uuid, typ string) bool
}

// Convert rewrites the header on dev (size bytes, the header device's) as
// LUKS version (1 or 2), as cryptsetup 2.6.1's convert does, and returns
// the new header read back. A header already of that version is a
// ConvertError. Hold the exclusive header lock around it.
func (h *Header) Convert(dev Device, size int64, version int, opts ConvertOptions) (*Header, error) {
	if h.Version() == version {
		return nil, refuse("Device is already LUKS%d type.", version)
	}
	if err := h.Requirements(); err != nil {
		return nil, err
	}
	var err error
	switch v := h.impl.(type) {
	case *luks1Header:
		err = v.toLUKS2(dev, size, opts)
	case *header:
		err = v.toLUKS1(dev, size, opts)
	}
	if err != nil {
		return nil, err
	}
	// A detached header file may have grown.
	return Read(dev, 0)
}

// toLUKS2 is LUKS2_luks1_to_luks2.
func (h *luks1Header) toLUKS2(dev Device, size int64, opts ConvertOptions) error {
	maxSize := int64(h.payloadOffset) * 512
	if maxSize == 0 {
		maxSize = size // a detached header: the header device's size
	}
	luks1Size := roundUp(int64(h.keyAreaEnd())*512, luks1AlignKeyslots)
	if h.keyslotsStart() != luks1AlignKeyslots/512 {
		return refuse("")
	}
	if !usableCipher(h.spec(), int(h.keyBytes)) {
		return refuse("Unable to use cipher specification %s for LUKS2.", h.spec())
	}
	if luksmetaPresent(dev, luks1Size) {
		return refuse("Unable to convert header with LUKSMETA additional metadata.")
	}
	required := luks1Size + convertShift
	if maxSize < required && !fallocate(dev, required) {
		return refuse("Unable to move keyslot area. Not enough space.")
	}
	maxSize = max(maxSize, required)
	root := h.luks2Root(uint64(maxSize - 2*hdrSize16K))
	next := &header{fresh: true, bin: binHeader{hdrSize: hdrSize16K, seqID: 1, csumAlg: "sha256", uuid: h.uuidText}}
	m, err := parseMetadata(root, hdrSize16K)
	if err != nil {
		return refuse("Cannot convert to LUKS2 format - invalid metadata.")
	}
	if opts.InUse != nil && opts.InUse(h.uuidText, "LUKS1") {
		return ErrConvertInUse
	}
	moveSize := luks1Size - luks1AlignKeyslots
	if uint64(moveSize) > m.keyslotsSize {
		return refuse("Unable to move keyslot area. LUKS2 keyslots area too small.")
	}
	if err := randomSalts(next); err != nil {
		return err
	}
	if err := h.unchanged(dev); err != nil {
		return err
	}
	if err := moveArea(dev, luks1AlignKeyslots, 2*hdrSize16K, moveSize); err != nil {
		return err
	}
	next.meta = m
	return next.write(dev)
}

// keyslotsStart is the lowest keyslot material offset, in sectors.
func (h *luks1Header) keyslotsStart() uint32 {
	low := h.slots[0].offset
	for _, s := range h.slots {
		low = min(low, s.offset)
	}
	return low
}

// luks2Root is the LUKS2 metadata cryptsetup makes of a LUKS1 header
// (json_luks1_object), keyslots moved by convertShift, in its field order.
func (h *luks1Header) luks2Root(keyslotsSize uint64) *node {
	cipher := h.cipherName
	if h.cipherMode != "" {
		cipher += "-" + h.cipherMode
	}
	b64 := base64.StdEncoding.EncodeToString
	keyslots := jObject()
	var ids []*node
	for i, s := range h.slots {
		if s.active != luks1KeyEnabled {
			continue
		}
		length := int64(luks1AFSectors(h.keyBytes)) * 512
		keyslots.set(strconv.Itoa(i), obj(
			"type", jString("luks2"),
			"key_size", jInt(int64(h.keyBytes)),
			"kdf", obj("type", jString("pbkdf2"), "hash", jString(h.hashSpec),
				"iterations", jInt(int64(s.iterations)), "salt", jString(b64(s.salt[:]))),
			"af", obj("type", jString("luks1"), "hash", jString(h.hashSpec), "stripes", jInt(luks1Stripes)),
			"area", obj("type", jString("raw"), "encryption", jString(cipher),
				"key_size", jInt(int64(h.keyBytes)),
				"offset", jUint64Str(uint64(s.offset)*512+convertShift),
				"size", jUint64Str(uint64(roundUp(length, 4096)))),
		))
		ids = append(ids, jString(strconv.Itoa(i)))
	}
	return obj(
		"keyslots", keyslots,
		"tokens", jObject(),
		"segments", obj("0", obj(
			"type", jString("crypt"),
			"offset", jUint64Str(uint64(h.payloadOffset)*512),
			"iv_tweak", jString("0"),
			"size", jString("dynamic"),
			"encryption", jString(cipher),
			"sector_size", jInt(512))),
		"digests", obj("0", obj(
			"type", jString("pbkdf2"),
			"keyslots", jArray(ids...),
			"segments", jArray(jString("0")),
			"hash", jString(h.hashSpec),
			"salt", jString(b64(h.mkDigestSalt[:])),
			"digest", jString(b64(h.mkDigest[:])),
			"iterations", jInt(int64(h.mkDigestIter)))),
		"config", obj(
			"json_size", jUint64Str(hdrSize16K-binHeaderSize),
			"keyslots_size", jUint64Str(keyslotsSize-keyslotsSize%4096)),
	)
}

// usableCipher reports whether luksd can run spec with a keyBytes key, as
// cryptsetup's LUKS2_check_cipher asks its crypto backend.
func usableCipher(spec string, keyBytes int) bool {
	key := make([]byte, keyBytes)
	for i := range key {
		key[i] = byte(i*7 + 1) // no weak key; never used for data
	}
	c, err := dmcrypt.New(spec, key)
	if err != nil {
		return false
	}
	c.Wipe()
	return true
}

// luksmetaPresent reports whether the luksmeta package's metadata follows
// the LUKS1 keyslots (a short read is no metadata).
func luksmetaPresent(dev io.ReaderAt, off int64) bool {
	var b [8]byte
	n, _ := dev.ReadAt(b[:], off)
	return n == len(b) && string(b[:]) == "LUKSMETA"
}

// growable is a header device that may be an image file.
type growable interface {
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// fallocate makes an image file at least size bytes long, as cryptsetup's
// device_fallocate; a block device (or a remote volume) cannot grow.
func fallocate(dev Device, size int64) bool {
	g, ok := dev.(growable)
	if !ok {
		return false
	}
	fi, err := g.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return fi.Size() >= size || g.Truncate(size) == nil
}

// moveArea copies n bytes from from to to, in chunks no longer than the
// distance and in the direction that never overwrites what is still to be
// copied, then flushes. The destination must be readable first (an image
// file is grown to hold it), as cryptsetup checks.
func moveArea(dev Device, from, to, n int64) error {
	if n <= 0 {
		return nil
	}
	fallocate(dev, to+n)
	chunk := from - to
	if chunk < 0 {
		chunk = -chunk
	}
	buf := make([]byte, min(chunk, n))
	defer clear(buf)
	if _, err := dev.ReadAt(buf[:1], to+n-1); err != nil {
		return fmt.Errorf("%w: %v", ErrMoveFailed, err)
	}
	step := func(off int64) error {
		b := buf[:min(int64(len(buf)), n-off)]
		if _, err := dev.ReadAt(b, from+off); err != nil {
			return fmt.Errorf("%w: %v", ErrMoveFailed, err)
		}
		if _, err := dev.WriteAt(b, to+off); err != nil {
			return fmt.Errorf("%w: %v", ErrMoveFailed, err)
		}
		return nil
	}
	if to > from {
		last := (n - 1) / int64(len(buf)) * int64(len(buf))
		for off := last; off >= 0; off -= int64(len(buf)) {
			if err := step(off); err != nil {
				return err
			}
		}
	} else {
		for off := int64(0); off < n; off += int64(len(buf)) {
			if err := step(off); err != nil {
				return err
			}
		}
	}
	return flush(dev)
}

func roundUp(n, align int64) int64 { return (n + align - 1) / align * align }

// randomSalts gives a new header both copies' salts.
func randomSalts(h *header) error {
	if _, err := rand.Read(h.bin.salt[:]); err != nil {
		return err
	}
	_, err := rand.Read(h.salt2[:])
	return err
}
