// Package luks2 reads, validates, unlocks, creates and edits LUKS2 and
// LUKS1 headers byte-for-byte as cryptsetup 2.6.1 does, and owns the
// format's policy: the defaults and limits luksFormat applies and what
// cryptsetup's library answers about keyslots, so that callers ask
// instead of keeping copies.
//
// Read loads a Header from a Device (an image file or block device).
// Unlock opens a keyslot with a passphrase and returns the volume key;
// Segment says where the data is and how it is encrypted. The edits
// (AddKey, KillSlot, ChangeKey, MoveKey, ReplaceKey, ConvertKey, SetUUID,
// SetLabel, SetPriority, the token methods) write the header in an order a
// power cut tears at most one copy of; hold LockHeader's exclusive lock
// around them, as cryptsetup does (HeaderFile reads and edits an open file
// under the locks). Format makes a new volume, Backup and Restore copy the
// header area, Dump prints luksDump's text. Errors are the Err values and
// *Error types below; each says what cryptsetup reports.
//
// Questions to ask before acting: MaxKeyslots, Header.KeyslotStatus,
// BoundKeyslots and FreeKeyslot (keyslots); FormatLayout,
// DefaultKeySize, DefaultSectorSize, ValidSectorSize, DataOffsetAligned,
// ValidUUID and AutoCipher (luksFormat); CheckPBKDF and Calibrate (key derivation);
// LUKSSignatures and ForeignSignature (what else a device holds).
//
// Where things live: this file is the API; ondisk.go the interface both
// formats implement. LUKS2: binary.go (binary headers), read.go (choosing
// and repairing a copy), header.go (writing both copies), jsonc.go,
// jsontree.go and jsonvalue.go (JSON as json-c parses and prints it),
// validate.go and validate_slots.go (cryptsetup's validation),
// metadata.go (the typed view), keyslot.go and digest.go (key material
// and volume key digests), unlock.go, edit.go, unbound.go, convertkey.go,
// token.go, requirements.go, dump.go and format.go. LUKS1: luks1.go
// (reading, unlocking, dump), luks1_edit.go and luks1_format.go. Both:
// af.go (the AF splitter), pbkdf.go, calibrate.go, cputime.go, hash.go and
// whirlpool.go (key derivation), layout.go (format defaults and layouts),
// autocipher.go (--cipher auto), slotstatus.go, backup.go, restore.go,
// lock.go, headerfile.go (reading and editing under the locks) and
// signatures.go.
package luks2

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

var (
	// ErrNotLUKS: the device has no valid LUKS header (CLI exit 1, as
	// cryptsetup's "is not a valid LUKS device").
	ErrNotLUKS = errors.New("device is not a valid LUKS device")
	// ErrWrongPassphrase: no keyslot opened with the passphrase (CLI exit 2).
	ErrWrongPassphrase = errors.New("no key available with this passphrase")
	// ErrNoUsableKeyslot: Unlock found no keyslot to try, or the last one
	// it met is not bound to the data segment (CLI exit 1, cryptsetup's "No
	// usable keyslot is available.").
	ErrNoUsableKeyslot = errors.New("no usable keyslot is available")
	// ErrNoFreeSlot: every keyslot is taken (CLI exit 1).
	ErrNoFreeSlot = errors.New("all key slots full")
	// ErrVolumeKeyMismatch: a volume key given to AddKey does not match the
	// volume's digest (CLI exit 2, "Volume key does not match the volume.").
	ErrVolumeKeyMismatch = errors.New("volume key does not match the volume")
	// ErrUnsupported: a header luksd refuses to use (reencryption in progress,
	// unknown mandatory requirements, unsafe cipher). CLI exit 1.
	ErrUnsupported = errors.New("unsupported LUKS header")
	// ErrNoKeyslotSpace: the keyslots area has no room for another
	// keyslot's key material (CLI exit 1, "No space for new keyslot.").
	ErrNoKeyslotSpace = errors.New("no space for new keyslot")
	// ErrConcurrentUpdate: the header on the device changed since it was
	// read (another editor wrote it); nothing was written (CLI exit 1,
	// cryptsetup's "Detected attempt for concurrent LUKS2 metadata update.
	// Aborting operation.").
	ErrConcurrentUpdate = errors.New("concurrent LUKS metadata update")
)

// ReadError: the device could not be read where its header starts (an
// I/O error, a remote server or store that does not answer). It is
// ErrNotLUKS too, as cryptsetup reports such a device; the cause is kept
// so that the CLI can say it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "cannot read the header: " + e.Err.Error() }

func (e *ReadError) Unwrap() []error { return []error{ErrNotLUKS, e.Err} }

// TooSmallError: the device is smaller than the header area its header
// describes (cryptsetup's "Device X is too small. Need at least N bytes.").
// It is ErrNotLUKS too.
type TooSmallError struct{ Need int64 }

func (e *TooSmallError) Error() string {
	return fmt.Sprintf("device is too small: need at least %d bytes", e.Need)
}

func (e *TooSmallError) Unwrap() error { return ErrNotLUKS }

// VersionError: the primary header has the LUKS magic and a version other
// than 1 or 2 (cryptsetup's "Unsupported LUKS version N."). It is
// ErrNotLUKS too.
type VersionError struct{ Version int }

func (e *VersionError) Error() string { return fmt.Sprintf("unsupported LUKS version %d", e.Version) }

func (e *VersionError) Unwrap() error { return ErrNotLUKS }

// Device is where a header lives: an image file or block device. Flush
// makes every write that completed before it durable: edits call it so that
// key material is on disk before the header that names it, and the primary
// header copy before the secondary is touched, so that a power cut tears at
// most one copy.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Flush() error
}

// Segment is the data segment a volume key decrypts.
type Segment struct {
	Offset     int64  // bytes from the start of the device
	Size       int64  // bytes; 0 means dynamic (to the end of the device)
	Cipher     string // dm-crypt spec, e.g. "aes-xts-plain64"
	SectorSize int    // 512..4096
	KeySize    int    // volume key bytes
}

// PBKDF selects and tunes the key derivation of a new keyslot.
type PBKDF struct {
	Type       string        // "argon2id" (default), "argon2i", "pbkdf2"
	Hash       string        // pbkdf2 hash, default "sha256"
	IterTime   time.Duration // calibration target, default 2s
	Iterations int           // forced time cost / iterations (--pbkdf-force-iterations); 0 = calibrate
	MemoryKiB  int           // argon2 memory, default min(1 GiB, RAM/2)
	Parallel   int           // argon2 threads, default min(4, CPUs)
	// AreaCipher and AreaKeySize (bytes) encrypt the new keyslot's area
	// (--keyslot-cipher, --keyslot-key-size; LUKS2 only; see
	// CheckKeyslotCipher); "" keeps cryptsetup's default, the data
	// segment's cipher and key size.
	AreaCipher  string
	AreaKeySize int
}

// FormatOptions are luksFormat's parameters; zero values mean cryptsetup's defaults.
type FormatOptions struct {
	Cipher       string // default "aes-xts-plain64"
	KeySize      int    // volume key bytes; default DefaultKeySize(Cipher)
	SectorSize   int    // default DefaultSectorSize
	Hash         string // digest/AF hash, default "sha256"
	PBKDF        PBKDF
	UUID         string // default random
	Label        string
	Subsystem    string
	MetadataSize int64  // --luks2-metadata-size, default 16 KiB
	KeyslotsSize int64  // --luks2-keyslots-size, default so the data starts at 16 MiB
	DataOffset   int64  // bytes (--offset is in 512-byte sectors; the CLI converts); 0 = default
	Keyslot      int    // -1 = first free
	VolumeKey    []byte // nil = random from crypto/rand
	Version      int    // 2 (default) or 1; LUKS1 takes PBKDF2 only, no label, subsystem, area sizes or sector size but 512
	DetachedData bool   // --header given: data segment offset 0 on the data device
	// PayloadAlign (--align-payload, in bytes; 0 = none). LUKS1: the
	// payload starts at the end of the keyslot areas rounded up to it
	// (default 1 MiB), or with DetachedData at it. LUKS2: at the default
	// data offset rounded up to it, with the default keyslots area; it
	// takes no DataOffset, DetachedData or area sizes.
	PayloadAlign int64
}

// DumpOptions select luksDump's output.
type DumpOptions struct {
	VolumeKey []byte // non-nil: print it as --dump-volume-key does
	Device    string // device path, printed where cryptsetup prints it
	// KeyFile: the key went to this file (--volume-key-file); say so in
	// place of the key, as cryptsetup does.
	KeyFile string
}

// Header is a loaded and validated LUKS2 or LUKS1 header. Reading methods
// may run concurrently; edits (AddKey, KillSlot, SetLabel, SetUUID, ...)
// must not run concurrently with anything else on the same Header. LUKS1
// headers take AddKey (PBKDF2 only), KillSlot and SetUUID; the LUKS2-only
// edits return ErrUnsupported for them.
type Header struct {
	impl onDisk
}

// Read reads and validates the header at the start of dev (size bytes; 0
// when unknown) and picks the copy cryptsetup 2.6.1 picks: a LUKS2 volume
// whose primary copy is damaged reads through its secondary. Read writes
// nothing; see Damaged and Repair.
func Read(dev io.ReaderAt, size int64) (*Header, error) { return readHeader(dev, size) }

// ReadLUKS2 is Read for a LUKS2 header whatever version the primary copy
// names (cryptsetup's load with --type luks2): a primary whose version
// field was damaged reads through the secondary.
func ReadLUKS2(dev io.ReaderAt, size int64) (*Header, error) { return readHeaderAs(dev, size, 2) }

// Damaged reports whether one LUKS2 header copy was not good when read
// (damaged, invalid, or older than the other): Repair would rewrite it.
func (h *Header) Damaged() bool {
	v2, ok := h.v2()
	return ok && v2.damaged != ""
}

// Repair rewrites the copy that was not good from the good one, as
// cryptsetup does when it loads a header it may write (its binary header
// and JSON area, a fresh salt), and flushes. It does nothing when both
// copies were good. Take the exclusive lock and read the header again
// under it before repairing.
func (h *Header) Repair(dev Device) error {
	if v2, ok := h.v2(); ok {
		return v2.repair(dev)
	}
	return nil
}

// IsLUKS reports whether dev starts with a LUKS magic and a known version.
func IsLUKS(dev io.ReaderAt) bool { return isLUKS(dev) }

// Format writes a new LUKS2 (or, with Version 1, LUKS1) header to dev and
// one keyslot for passphrase, returning the header and the volume key
// (caller wipes it). size is the size of the data device, 0 when unknown
// (with DetachedData, dev is the header file and size still the data
// device's); a device no larger than the header area is refused. Without
// a SectorSize, the sector size is DefaultSectorSize(size, opts), or 512
// for an unknown size; for block devices pass SectorSize (the physical
// block size). FormatLayout tells where the parts will go.
func Format(dev Device, size int64, opts FormatOptions, passphrase []byte) (*Header, []byte, error) {
	return format(dev, size, opts, passphrase)
}

// Requirements reports the header's mandatory requirements as the edits
// cryptsetup refuses for them see them: nil, ErrUnmetRequirements,
// ErrReencryption or ErrLegacyReencryption (LUKS1: nil).
func (h *Header) Requirements() error { return h.impl.requirementsMet() }

// Version is 1 or 2.
func (h *Header) Version() int { return h.impl.version() }

// UUID is the UUID as stored.
func (h *Header) UUID() string { return h.impl.uuid() }

// Label is the LUKS2 label as stored ("" for LUKS1, which has none).
func (h *Header) Label() string {
	if v2, ok := h.v2(); ok {
		return v2.bin.label
	}
	return ""
}

// Subsystem is the LUKS2 subsystem as stored ("" for LUKS1).
func (h *Header) Subsystem() string {
	if v2, ok := h.v2(); ok {
		return v2.bin.subsystem
	}
	return ""
}

// DataOffset is where the data starts on the data device, in bytes: the
// lowest LUKS2 segment offset (0 without segments), or LUKS1's payload
// offset.
func (h *Header) DataOffset() int64 {
	if v2, ok := h.v2(); ok {
		return int64(v2.dataOffset())
	}
	if l1, ok := h.impl.(*luks1Header); ok {
		return int64(l1.payloadOffset) * 512
	}
	return 0
}

// Segment returns the data segment (segment "0", or LUKS1's payload).
// Ciphers dmcrypt cannot run (kernel-API "capi:" specs, unknown modes) and
// unsafe headers give an error wrapping ErrUnsupported.
func (h *Header) Segment() (Segment, error) { return h.impl.segment() }

// Flags returns the persistent activation flags ("allow-discards", ...;
// LUKS1 has none).
func (h *Header) Flags() []string {
	if v2, ok := h.v2(); ok {
		return append([]string(nil), v2.meta.flags...)
	}
	return nil
}

// ActiveKeyslots returns the numbers of the keyslots in use, ascending.
func (h *Header) ActiveKeyslots() []int { return h.impl.activeKeyslots() }

// Unlock tries the keyslots (priority order, then the metadata's order; only
// keyslots bound to the data segment unless slot >= 0 names one) and returns
// the volume key and the slot that opened. When none does:
// ErrWrongPassphrase, or ErrNoUsableKeyslot as cryptsetup decides between
// them (LUKS2).
func (h *Header) Unlock(dev io.ReaderAt, passphrase []byte, slot int) ([]byte, int, error) {
	return h.impl.unlock(dev, passphrase, slot, false)
}

// UnlockUnbound is Unlock where keyslots bound to no segment count too, as
// in cryptsetup's open --test-passphrase --unbound: it returns the key the
// keyslot that opened holds, which is the volume key only for a bound one.
// LUKS1 has no unbound keyslots: it is Unlock.
func (h *Header) UnlockUnbound(dev io.ReaderAt, passphrase []byte, slot int) ([]byte, int, error) {
	return h.impl.unlock(dev, passphrase, slot, true)
}

// AddKey adds a keyslot for passphrase holding vk (slot -1 = first free).
// vk must match the volume's digest (else ErrVolumeKeyMismatch). LUKS1:
// PBKDF2 with the header's hash, p.Iterations or calibrated to p.IterTime
// (at least 1000); other PBKDF types give ErrLUKS1PBKDF.
func (h *Header) AddKey(dev Device, vk, passphrase []byte, slot int, p PBKDF) (int, error) {
	return h.impl.addKey(dev, vk, passphrase, slot, p)
}

// AddUnboundKey adds a keyslot for passphrase holding key, a key bound to
// no segment with a digest of its own (luksAddKey --unbound; LUKS2 only).
// Unlock without a named slot never tries it.
func (h *Header) AddUnboundKey(dev Device, key, passphrase []byte, slot int, p PBKDF) (int, error) {
	v2, ok := h.v2()
	if !ok {
		return -1, fmt.Errorf("%w: LUKS1 has no unbound keyslots", ErrUnsupported)
	}
	return v2.addUnboundKey(dev, key, passphrase, slot, p)
}

// Unbound reports whether keyslot slot exists and holds a key bound to no
// segment (LUKS2 only).
func (h *Header) Unbound(slot int) bool { return h.KeyslotStatus(slot) == KeyslotUnbound }

// VerifyVolumeKey checks vk against the data segment's digest: nil, or
// ErrVolumeKeyMismatch.
func (h *Header) VerifyVolumeKey(vk []byte) error {
	ok, err := h.impl.checkVolumeKey(vk)
	if err != nil {
		return err
	}
	if !ok {
		return ErrVolumeKeyMismatch
	}
	return nil
}

// KillSlot wipes keyslot slot and removes it from the metadata (LUKS1:
// disables it in the header, then wipes its key material).
func (h *Header) KillSlot(dev Device, slot int) error { return h.impl.killSlot(dev, slot) }

// SetLabel changes label and/or subsystem (nil = keep).
func (h *Header) SetLabel(dev Device, label, subsystem *string) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 headers have no label or subsystem", ErrUnsupported)
	}
	return v2.setLabel(dev, label, subsystem)
}

// Priority is a LUKS2 keyslot's priority (config --priority).
type Priority int

const (
	PriorityIgnore Priority = 0 // tried only when named
	PriorityNormal Priority = 1
	PriorityPrefer Priority = 2 // tried before the normal ones
)

// SetPriority changes a LUKS2 keyslot's priority.
func (h *Header) SetPriority(dev Device, slot int, p Priority) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 keyslots have no priority", ErrUnsupported)
	}
	return v2.setPriority(dev, slot, p)
}

// SetUUID changes the UUID.
func (h *Header) SetUUID(dev Device, uuid string) error {
	if uuid == "" {
		var err error
		if uuid, err = newUUID(); err != nil {
			return err
		}
	}
	if !ValidUUID(uuid) {
		return fmt.Errorf("wrong LUKS UUID format provided: %q", uuid)
	}
	if err := h.impl.requirementsMet(); err != nil {
		return err
	}
	// cryptsetup stores UUIDs in lower case.
	return h.impl.setUUID(dev, strings.ToLower(uuid))
}

// Dump writes luksDump's text, identical in layout to cryptsetup 2.6's.
func (h *Header) Dump(w io.Writer, opts DumpOptions) error { return h.impl.dump(w, opts) }

// DumpUnbound writes luksDump --unbound -S slot's text for key, the key
// UnlockUnbound found in that unbound keyslot (opts.Device as cryptsetup
// names it; opts.VolumeKey is not used).
func (h *Header) DumpUnbound(w io.Writer, slot int, key []byte, opts DumpOptions) error {
	return dumpUnbound(w, h.UUID(), slot, key, opts)
}

// JSON returns the metadata exactly as luksDump --dump-json-metadata prints
// it (json-c's pretty form, no trailing newline). nil for LUKS1.
func (h *Header) JSON() []byte {
	if v2, ok := h.v2(); ok {
		return v2.meta.root.pretty()
	}
	return nil
}

// HeaderSize is the size in bytes of the whole header area (both binary
// headers, JSON areas and keyslots area; LUKS1: up to the payload).
func (h *Header) HeaderSize() int64 { return h.impl.headerSize() }

// Backup copies the header area of dev into w (luksHeaderBackup).
func Backup(dev io.ReaderAt, size int64, w io.Writer) error { return backup(dev, size, w) }

// Restore validates the backup image and writes it over dev's header area
// (luksHeaderRestore): LUKS2 both header copies and the keyslots area,
// LUKS1 up to the end of the last keyslot's key material. It refuses what
// CheckRestore refuses.
func Restore(dev Device, size int64, backup io.ReaderAt, backupSize int64) error {
	return restore(dev, size, backup, backupSize)
}

var (
	// ErrRestoreDataOffset: the device holds a header of the backup's
	// version with another data offset (LUKS1: or key size).
	ErrRestoreDataOffset = errors.New("data offset differs on device and backup")
	// ErrRestoreAreaSize: the device holds a LUKS2 header whose header and
	// keyslots areas have another size than the backup's.
	ErrRestoreAreaSize = errors.New("header and keyslots area size differs on device and backup")
	// ErrRestoreRequirements: the backup has mandatory requirements
	// cryptsetup forbids in a restore (unknown ones, offline reencryption).
	ErrRestoreRequirements = errors.New("forbidden LUKS2 requirements detected in backup")
)

// RestoreCheck is what cryptsetup 2.6.1's luksHeaderRestore learns about
// the device before it asks for confirmation.
type RestoreCheck struct {
	Version      int  // the backup's LUKS version
	Replaces     bool // the device holds a valid header of that version
	UUIDDiffers  bool // ... whose UUID is not the backup's
	OtherVersion int  // a LUKS1 backup meets a header of this other version (cryptsetup: "Unsupported LUKS version 2.")
	// The device's LUKS2 header has requirements cryptsetup warns about in
	// its question: ones it does not know, an offline reencryption.
	UnknownRequirements, OfflineReencryption bool
}

// CheckRestore reads the backup and the device's header as Restore would:
// an invalid backup, ErrRestoreDataOffset or ErrRestoreAreaSize refuse the
// restore; anything else on the device is replaced.
func CheckRestore(dev io.ReaderAt, size int64, backup io.ReaderAt, backupSize int64) (RestoreCheck, error) {
	return checkRestore(dev, size, backup, backupSize)
}
