package luks2

import (
	"errors"
	"fmt"
	"io"
)

// LUKS2 reencryption as cryptsetup 2.6.1 writes it (reencrypt mode,
// forward direction): the online-reencrypt-v2 requirement, a "reencrypt"
// keyslot whose area holds the hotzone's resilience data (checksum,
// journal or none), the data segments (new cipher before the hotzone, the
// hotzone flagged in-reencryption while it is rewritten, old cipher
// after it), the backup-previous and backup-final segments that describe
// the old and new cipher, and the reencryption digest
// (reencrypt_digest.go). reencrypt_init.go marks a volume,
// reencrypt_segments.go lays out the segments of each step,
// reencrypt_run.go rewrites the data hotzone by hotzone and finishes,
// reencrypt_recover.go repairs a hotzone a crash interrupted.

// ReencryptParams are the choices of a new reencryption; zero values keep
// the volume's cipher, key size and sector size, and pick checksum
// resilience with sha256.
type ReencryptParams struct {
	Cipher     string
	KeySize    int // bytes
	SectorSize int
	Resilience string // "checksum", "journal" or "none"; "datashift" with Shift
	Hash       string // checksum hash
	// Shift, when set, moves the data Shift bytes toward the device's end
	// as it is rewritten (cryptsetup's reencrypt --reduce-device-size):
	// the data offset grows by Shift and the data's last Shift bytes are
	// given up (reencrypt_shift.go).
	Shift int64
	// PBKDF, when set, makes the new keyslots as cryptsetup's reencrypt
	// --pbkdf, --hash, --iter-time or --pbkdf-force-iterations does: with
	// these parameters (calibrated unless forced) and each old keyslot's
	// area cipher. nil copies each old keyslot's PBKDF.
	PBKDF *PBKDF
}

// ReencryptRun steers Reencrypt.
type ReencryptRun struct {
	// HotzoneSize is the most data rewritten per step (bytes; 0 = 64 MiB,
	// less where the resilience area is smaller).
	HotzoneSize int64
	// Data is where the data is read and written, in pieces on several
	// goroutines at once (the device without the metadata locks, e.g. the
	// *os.File under a HeaderFile); nil uses the Device given.
	Data DataDevice
	// Commit runs a header write (the caller's exclusive metadata lock);
	// nil runs it as it is.
	Commit func(write func() error) error
	// Resilience and Hash change the resilience mode (and checksum hash)
	// for the rest of the run, as cryptsetup's reencrypt --resilience on
	// resume does; "" keeps the recorded one.
	Resilience, Hash string
	// DeviceSize, when set, is the data (bytes from the data offset) the
	// run covers, as cryptsetup's --device-size: the rest is left as it
	// is and the old segment after the hotzone gets a fixed size.
	DeviceSize int64
	// Progress is called after each step with the bytes done and total.
	Progress func(done, total int64)
	// Stop is asked between steps; true ends the run with the metadata
	// written, to be resumed later.
	Stop func() bool
	// Hold, when set, is called before a step reads its hotzone (data
	// offsets [off, off+length)), and the function it returns once the
	// step is over: with the bytes now in the new cipher on disk and in
	// the metadata, or -1 when the step failed. An online job keeps
	// requests out of the hotzone in between (reencrypt_step.go).
	Hold func(off, length int64) (release func(done int64))
}

// DataDevice is the data side of a device: safe for concurrent use.
type DataDevice interface {
	io.ReaderAt
	io.WriterAt
}

var (
	// ErrNotInReencryption: Reencrypt on a volume not marked for it
	// (cryptsetup's "Device not marked for LUKS2 reencryption.").
	ErrNotInReencryption = errors.New("device not marked for LUKS2 reencryption")
	// ErrReencryptInvalid: the reencryption metadata does not match the
	// volume keys (cryptsetup's "Reencryption metadata is invalid.").
	ErrReencryptInvalid = errors.New("reencryption metadata is invalid")
	// ErrReencryptDigest: the reencryption digest does not verify, the
	// metadata was changed (an ErrReencryptInvalid).
	ErrReencryptDigest = fmt.Errorf("%w: digest mismatch", ErrReencryptInvalid)
	// ErrReencryptUnsupported: reencryption metadata luksd cannot resume
	// or open (a mode, direction or resilience it does not run there).
	ErrReencryptUnsupported = fmt.Errorf("%w: reencryption mode", ErrUnsupported)
	// ErrIllegalDeviceSize: a DeviceSize beyond the data ("Illegal device
	// size requested in reencryption parameters.").
	ErrIllegalDeviceSize = errors.New("illegal device size requested in reencryption parameters")
	// ErrDecryptNotDetached: DecryptInitDetached on a header whose data
	// does not start at offset 0 ("LUKS2 decryption is supported with
	// detached header device only (with data offset set to 0).").
	ErrDecryptNotDetached = errors.New("LUKS2 decryption is supported with detached header device only (with data offset set to 0)")
	// ErrShiftUnaligned: a Shift that is not a multiple of the sector
	// size ("Data shift value is not aligned to encryption sector size").
	ErrShiftUnaligned = errors.New("data shift value is not aligned to encryption sector size")
	// ErrReencryptionInitialized: ReencryptInit on a volume already marked
	// ("LUKS2 reencryption already initialized in metadata.").
	ErrReencryptionInitialized = errors.New("LUKS2 reencryption already initialized in metadata")
)

// InReencryption reports whether the volume is marked for LUKS2
// reencryption (the online-reencrypt requirement).
func (h *Header) InReencryption() bool {
	return errors.Is(h.Requirements(), ErrReencryption)
}

// ReencryptInit marks the volume for reencryption to p, as cryptsetup's
// reencrypt --init-only does: a new volume key, a new (unbound) keyslot for
// each keyslot in passphrases (same PBKDF and area cipher, first free
// number), the reencrypt keyslot, the segments and digests, and the
// requirement, in one header write. devSize is the data device's size.
func (h *Header) ReencryptInit(dev Device, devSize int64, passphrases map[int][]byte, p ReencryptParams) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 reencryption", ErrUnsupported)
	}
	return v2.reencryptInit(dev, devSize, passphrases, p)
}

// Reencrypt runs (or resumes) the reencryption of the volume on dev
// (header and data; devSize bytes) offline: it unlocks the old and new
// volume keys with passphrase (keyslot slot, or any with -1), checks the
// reencryption digest, repairs an interrupted hotzone, then rewrites the
// data hotzone by hotzone and, at the end, leaves the header cryptsetup
// leaves. It returns with the metadata written when r.Stop says so.
func (h *Header) Reencrypt(dev Device, devSize int64, passphrase []byte, slot int, r ReencryptRun) error {
	v2, ok := h.v2()
	if !ok || !h.InReencryption() {
		return ErrNotInReencryption
	}
	if r.DeviceSize > 0 && (isEncryptShift(v2.meta.root) || isDecryptShift(v2.meta.root) || isReencryptShift(v2.meta.root)) {
		return fmt.Errorf("%w: --device-size with a data shift", ErrUnsupported)
	}
	if isEncryptShift(v2.meta.root) {
		return v2.encryptShift(dev, devSize, passphrase, slot, r)
	}
	if isDecryptShift(v2.meta.root) {
		return v2.decryptShift(dev, devSize, passphrase, slot, r)
	}
	if isReencryptShift(v2.meta.root) {
		return v2.reencryptShift(dev, devSize, passphrase, slot, r)
	}
	return v2.reencrypt(dev, devSize, passphrase, slot, r)
}
