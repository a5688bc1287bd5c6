package luks2

import (
	"fmt"
	"slices"

	"github.com/luksd/luksd/dmcrypt"
)

// reencryptState is the typed view of a header in reencryption.
type reencryptState struct {
	slot         int    // the reencrypt keyslot
	mode         string // "reencrypt"; "encrypt" (the old segment linear, no old key); "decrypt" (the new one linear, no new key)
	backward     bool   // decrypt: hotzones from the end of the data to its start
	front        uint64 // backward: data still old before the hotzone (^0: all of it)
	fixed        bool   // a run over part of the data (--device-size): the old part's size is fixed
	resilience   string
	hash         string // checksum
	blockSize    int    // checksum: bytes hashed per checksum
	areaOffset   uint64
	areaSize     uint64
	version      int
	oldSeg       *segment // backup-previous
	newSeg       *segment // backup-final
	oldDigest    *digest
	newDigest    *digest
	hot          *segment // the in-reencryption segment, or nil
	dataOffset   uint64
	done, length uint64 // bytes rewritten; the hotzone's length when hot
}

// reencryptState reads the reencryption metadata, refusing what luksd
// cannot resume.
func (h *header) reencryptState() (*reencryptState, error) {
	m := h.meta
	ksNode := reencryptKeyslotNode(m.root)
	if ksNode == nil {
		return nil, fmt.Errorf("%w: no reencrypt keyslot", ErrReencryptInvalid)
	}
	st := &reencryptState{}
	for id, k := range m.keyslots {
		if k.obj == ksNode {
			st.slot = id
		}
	}
	st.mode = ksNode.get("mode").str
	dir := ksNode.get("direction").str
	st.backward = dir == "backward"
	forward := (st.mode == "reencrypt" || st.mode == "encrypt") && dir == "forward"
	if !forward && !(st.mode == "decrypt" && st.backward) {
		return nil, fmt.Errorf("%w: %s %s (luksd resumes forward reencrypt and encrypt, backward decrypt and data-shift reencrypt)", ErrReencryptUnsupported, st.mode, dir)
	}
	area := ksNode.get("area")
	st.resilience = area.get("type").str
	st.areaOffset, st.areaSize = uint64Field(area, "offset"), uint64Field(area, "size")
	switch st.resilience {
	case "checksum":
		st.hash = area.get("hash").str
		st.blockSize = int(int64Of(area.get("sector_size")))
		// cryptsetup: "Hash algorithm %s is not available."
		if _, err := hashFunc(st.hash); err != nil {
			return nil, err
		}
	case "journal", "none":
	default:
		return nil, fmt.Errorf("%w: resilience %s", ErrReencryptUnsupported, st.resilience)
	}
	var ok bool
	if st.version, ok = reencryptVersionOf(m.mandatory); !ok {
		return nil, fmt.Errorf("%w: requirement %v", ErrReencryptUnsupported, m.mandatory)
	}
	for _, id := range sortedIDs(m.segments) {
		s := m.segments[id]
		switch {
		case slices.Contains(s.flags, "backup-previous"):
			st.oldSeg = s
		case slices.Contains(s.flags, "backup-final"):
			st.newSeg = s
		case slices.Contains(s.flags, "in-reencryption"):
			st.hot = s
		case slices.Contains(s.flags, "backup-moved-segment"):
			return nil, fmt.Errorf("%w: moved segment", ErrReencryptUnsupported)
		}
	}
	oldType, newType := "crypt", "crypt"
	switch st.mode {
	case "encrypt":
		oldType = "linear"
	case "decrypt":
		newType = "linear"
	}
	if st.oldSeg == nil || st.newSeg == nil || st.oldSeg.typ != oldType || st.newSeg.typ != newType {
		return nil, fmt.Errorf("%w: backup segments missing or of the wrong type", ErrReencryptUnsupported)
	}
	if st.oldSeg.offset != st.newSeg.offset || st.oldSeg.ivTweak != 0 || st.newSeg.ivTweak != 0 {
		return nil, fmt.Errorf("%w: data moved or IV tweak", ErrReencryptUnsupported)
	}
	st.dataOffset = st.oldSeg.offset
	st.oldDigest, st.newDigest = m.segmentDigest(st.oldSeg.id), m.segmentDigest(st.newSeg.id)
	if st.oldDigest == nil && st.mode != "encrypt" || st.newDigest == nil && st.mode != "decrypt" || st.oldDigest == st.newDigest {
		return nil, fmt.Errorf("%w: backup segments' digests", ErrReencryptInvalid)
	}
	switch s0 := m.segments[0]; {
	case st.backward && st.hot != nil:
		st.front, st.length = st.hot.offset-st.dataOffset, st.hot.size
	case st.backward && s0 != nil && s0.typ == "linear":
		st.front = 0
	case st.backward && s0 != nil && s0.size != 0:
		st.front = s0.size
	case st.backward:
		st.front = ^uint64(0)
	case st.hot != nil:
		st.done, st.length = st.hot.offset-st.dataOffset, st.hot.size
	case s0 != nil && s0 != st.oldSeg && m.segmentDigest(0) == st.newDigest && !slices.Contains(m.segments[0].flags, "backup-final"):
		st.done = s0.size // 0 (dynamic): all of it
		if s0.size == 0 {
			st.done = ^uint64(0)
		}
	}
	return st, nil
}

// oldKeyslots are the keyslots of the old volume key (none for an
// encryption).
func (st *reencryptState) oldKeyslots() []int {
	if st.oldDigest == nil {
		return nil
	}
	return st.oldDigest.keyslots
}

// linearCipher is the "cipher" of a linear (plaintext) segment.
type linearCipher struct{}

func (linearCipher) Encrypt([]byte, uint64, int) {}
func (linearCipher) Decrypt([]byte, uint64, int) {}
func (linearCipher) Wipe()                       {}

// segmentCipher is the sector cipher of s with key vk.
func segmentCipher(s *segment, vk []byte) (dmcrypt.SectorCipher, error) {
	if s.typ == "linear" {
		return linearCipher{}, nil
	}
	return dmcrypt.New(s.cipher, vk)
}

// settle turns a backward run's front into the bytes done, now that the
// data size total is known.
func (st *reencryptState) settle(total uint64) {
	if !st.backward {
		return
	}
	front := min(st.front, total)
	st.done = total - front
	if st.hot != nil {
		st.done = total - min(front+st.length, total)
	}
}

// dataSize is the size of the data the reencryption covers.
func (st *reencryptState) dataSize(devSize int64) (uint64, error) {
	if st.oldSeg.size != 0 {
		return st.oldSeg.size, nil
	}
	if uint64(devSize) <= st.dataOffset {
		return 0, fmt.Errorf("device is smaller than the data offset %d", st.dataOffset)
	}
	return uint64(devSize) - st.dataOffset, nil
}
