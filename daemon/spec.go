package daemon

import "time"

// Spec is one volume as the daemon runs it: where its ciphertext lives,
// how it is encrypted and how it is exposed. The CLI fills it in from the
// LUKS header it read and unlocked; the daemon never reads the header. The
// volume key travels on its own, in locked memory (Run, Spawn, Exec).
type Spec struct {
	Name     string // the mapping's NAME: its state is RunDir()/NAME
	Location string // the data device: a blockdev location (an image file or a block device today)
	Header   string // where the header lives (Location unless detached), for status
	Type     string // "LUKS2" or "LUKS1", for status
	UUID     string
	KeySlot  int // the keyslot that opened, for status
	Segment  Segment
	// Segments, when set, are the data area instead of Segment: a volume
	// in the middle of a reencryption (see reencrypt.go). Segment then
	// describes the final segment, for status.
	Segments []Segment
	Options  Options
}

// LinearSegment is the Cipher of a segment in plaintext (a LUKS2 linear
// segment: an encryption's data not yet encrypted), mapped as dm's linear
// target; it takes no key.
const LinearSegment = "linear"

// Segment is the encrypted data area of Location.
type Segment struct {
	Cipher     string // dm-crypt cipher spec, e.g. "aes-xts-plain64"
	Offset     int64  // bytes from the start of Location
	Size       int64  // bytes of plaintext; 0 = to the end of Location
	SectorSize int    // 512 to 4096
	KeySize    int    // bytes of volume key
	// IVOffset is added to every IV sector, in 512-byte units (plain
	// mode's --skip; 0 for LUKS).
	IVOffset uint64
	// IVLargeSectors numbers IVs in SectorSize units (plain mode's
	// --iv-large-sectors; never for LUKS).
	IVLargeSectors bool
	// KeyOffset is where this segment's key starts in the volume key
	// handed over (Spec.Segments: the keys one after the other).
	KeyOffset int
}

// Options say how the volume is exposed.
type Options struct {
	ReadOnly bool
	// AllowDiscards passes discards (TRIM) down to the data device. The
	// CLI decides it, once: the option or the header's persistent flag.
	AllowDiscards bool
	// Shared opens the data device without claiming it (open --type
	// plain --shared: other, non-overlapping mappings of it may exist,
	// as cryptsetup then skips its exclusive-open checks).
	Shared   bool
	Frontend string // a registered frontend: "nbd", "ublk" (frontend.Pick resolves auto)
	Device   string // a device wish: /dev/nbdN, a ublk device number; "" = a free one
	Recover  bool   // take over the kernel device of a daemon that died
	// IOTimeout fails a request the data device has not carried out in
	// this time with EIO, and the device stays (0: wait as long as it
	// takes, as dm-crypt).
	IOTimeout time.Duration
	// Mapping says how /dev/mapper/NAME is made: "dm" (a linear mapping,
	// which holds the block device: use /dev/mapper/NAME), "symlink" (to
	// the block device, which stays usable), or "" for dm where the
	// kernel has device-mapper (see mapper.go).
	Mapping string
}
