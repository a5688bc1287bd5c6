package luks2

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/luksd/luksd/dmcrypt"
)

func (h *header) reencryptInit(dev Device, devSize int64, passphrases map[int][]byte, p ReencryptParams) error {
	if err := h.requirementsMet(); errors.Is(err, ErrReencryption) {
		return ErrReencryptionInitialized
	} else if err != nil {
		return err
	}
	old, err := h.meta.dataSegment()
	if err != nil {
		return err
	}
	if old.ivTweak != 0 || old.typ != "crypt" {
		return fmt.Errorf("%w: segment 0 has an IV tweak or is not crypt", ErrReencryptUnsupported)
	}
	oldDigest := h.meta.segmentDigest(old.id)
	if p.Shift > 0 {
		p.Resilience = "datashift" // cryptsetup ignores --resilience here
	}
	p, err = h.reencryptDefaults(old, p)
	if err != nil {
		return err
	}
	if sector := int64(max(p.SectorSize, old.sectorSize)); p.Shift%sector != 0 {
		return fmt.Errorf("%w (%d bytes)", ErrShiftUnaligned, sector)
	}
	if p.Shift > 0 && old.size != 0 {
		return fmt.Errorf("%w: data shift of a segment with a fixed size", ErrReencryptUnsupported)
	}
	if old.size == 0 && devSize > 0 && (uint64(devSize)-old.offset)%uint64(max(p.SectorSize, old.sectorSize)) != 0 {
		return fmt.Errorf("device size is not aligned to the sector size %d", max(p.SectorSize, old.sectorSize))
	}
	if len(passphrases) == 0 {
		return ErrNoUsableKeyslot
	}
	var oldVK []byte
	slots := make([]int, 0, len(passphrases))
	for s := range passphrases {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	for _, s := range slots {
		vk, err := h.openAndVerify(dev, s, oldDigest, passphrases[s])
		if err != nil {
			return fmt.Errorf("keyslot %d: %w", s, err)
		}
		if oldVK == nil {
			oldVK = vk
		} else {
			clear(vk)
		}
	}
	defer clear(oldVK)
	newVK := make([]byte, p.KeySize)
	if _, err := rand.Read(newVK); err != nil {
		return err
	}
	defer clear(newVK)

	savedAreas := h.meta.areas
	defer func() { h.meta.areas = savedAreas }()
	h.meta.areas = append([]interval(nil), savedAreas...)
	root := h.meta.root.clone()
	keyslots := root.get("keyslots")
	var made []keyslotParams
	var newIDs []int
	taken := map[int]bool{}
	for _, s := range slots {
		ks, err := h.copiedKeyslot(h.meta.keyslots[s], p.KeySize, p.PBKDF, taken)
		if err != nil {
			return err
		}
		made = append(made, ks)
		newIDs = append(newIDs, ks.id)
		keyslots.set(strconv.Itoa(ks.id), ks.node(p.KeySize))
		assignTokens(root, s, ks.id)
	}
	reSlot, err := h.freeSlotExcept(taken)
	if err != nil {
		return err
	}
	areaOff, areaSize := h.maxAreaGap()
	direction, newOffset := "forward", old.offset
	if p.Shift > 0 {
		// A data shift keeps nothing in the area: cryptsetup takes the
		// first gap of one alignment unit.
		if areaOff, err = h.areaGap(keyslotsAlign); err != nil {
			return err
		}
		areaSize = keyslotsAlign
		direction, newOffset = "backward", old.offset+uint64(p.Shift)
	}
	if areaSize == 0 {
		return ErrNoKeyslotSpace
	}
	area := obj("offset", jUint64Str(areaOff), "size", jUint64Str(areaSize), "type", jString(p.Resilience))
	switch p.Resilience {
	case "checksum":
		area.set("hash", jString(p.Hash))
		area.set("sector_size", jInt(int64(max(p.SectorSize, old.sectorSize))))
	case "datashift":
		area.set("shift_size", jUint64Str(uint64(p.Shift)))
	}
	keyslots.set(strconv.Itoa(reSlot), obj("area", area, "type", jString("reencrypt"), "key_size", jInt(1),
		"mode", jString("reencrypt"), "direction", jString(direction), "priority", jInt(0)))

	segs := jObject()
	segs.set("0", root.get("segments").get(strconv.Itoa(old.id)).clone())
	segs.set("1", segmentNode(old.offset, old.size, 0, old.cipher, old.sectorSize, "backup-previous"))
	segs.set("2", segmentNode(newOffset, old.size, 0, p.Cipher, p.SectorSize, "backup-final"))
	root.set("segments", segs)
	digests := root.get("digests")
	digests.get(strconv.Itoa(oldDigest.id)).set("segments", idsNode([]int{0, 1}))
	ids := h.freeDigestIDs(2)
	// cryptsetup makes the new volume key's digest with the first new
	// keyslot's PBKDF hash, the reencryption digest with the last one's;
	// calibrated unless the PBKDF is copied or forced.
	digestIter := func(hash string, keyLen int) int {
		if p.PBKDF == nil {
			return minPBKDF2Iterations
		}
		return digestIterations(*p.PBKDF, hash, keyLen)
	}
	firstHash, lastHash := made[0].afHash, made[len(made)-1].afHash
	dn, err := newDigestNode(newVK, firstHash, digestIter(firstHash, len(newVK)), newIDs, []int{2})
	if err != nil {
		return err
	}
	digests.set(strconv.Itoa(ids[0]), dn)
	addRequirement(root, "online-reencrypt-v"+strconv.Itoa(reencryptVersion))
	data, err := reencryptVerificationData(root, reencryptVersion, oldVK, newVK)
	if err != nil {
		return err
	}
	defer clear(data)
	rd, err := newDigestNode(data, lastHash, digestIter(lastHash, len(data)), []int{reSlot}, nil)
	if err != nil {
		return err
	}
	digests.set(strconv.Itoa(ids[1]), rd)
	return h.store(dev, root, func() error {
		for i, ks := range made {
			if err := ks.writeMaterial(dev, newVK, passphrases[slots[i]]); err != nil {
				return err
			}
		}
		return nil
	})
}

// assignTokens assigns keyslot to each token keyslot from is assigned to,
// in token order, as cryptsetup reencrypt's assign_tokens does for the
// keyslot it makes from another.
func assignTokens(root *node, from, to int) {
	tokens := root.get("tokens")
	if tokens == nil {
		return
	}
	ids := make([]int, 0, len(tokens.keys))
	for _, k := range tokens.keys {
		if id, err := strconv.Atoi(k); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		ks := tokens.get(strconv.Itoa(id)).get("keyslots")
		if ks == nil || ks.kind != kindArray {
			continue
		}
		for _, v := range ks.vals {
			if v.str == strconv.Itoa(from) {
				ks.push(jString(strconv.Itoa(to)))
				break
			}
		}
	}
}

// reencryptDefaults fills p from the data segment and checks it.
func (h *header) reencryptDefaults(old *segment, p ReencryptParams) (ReencryptParams, error) {
	if p.Cipher == "" {
		p.Cipher = old.cipher
	}
	if p.SectorSize == 0 {
		p.SectorSize = old.sectorSize
	}
	if p.Resilience == "" {
		p.Resilience = "checksum"
	}
	if p.Hash == "" {
		p.Hash = "sha256"
	}
	spec, err := dmcrypt.ParseSpec(p.Cipher)
	if err != nil {
		return p, err
	}
	if p.KeySize == 0 {
		p.KeySize = h.segmentKeySize()
		if spec.CheckKeySize(p.KeySize) != nil {
			p.KeySize = DefaultKeySize(p.Cipher)
		}
	}
	if err := spec.CheckKeySize(p.KeySize); err != nil {
		return p, err
	}
	if !ValidSectorSize(2, p.SectorSize) {
		return p, fmt.Errorf("unsupported encryption sector size %d", p.SectorSize)
	}
	switch p.Resilience {
	case "checksum":
		if _, err := hashFunc(p.Hash); err != nil {
			return p, err
		}
	case "journal", "none":
	case "datashift":
		if p.Shift <= 0 {
			return p, fmt.Errorf("unsupported resilience mode %s", p.Resilience)
		}
	default:
		return p, fmt.Errorf("unsupported resilience mode %s", p.Resilience)
	}
	return p, nil
}

// copiedKeyslot is a keyslot for a keySize-byte key with k's area cipher
// at the first free number not in taken, which it adds there, as
// cryptsetup reencrypt makes the new keyslots: with k's PBKDF, or p's when
// given, and the PBKDF's hash (sha256 for argon2) as AF hash.
func (h *header) copiedKeyslot(k *keyslot, keySize int, p *PBKDF, taken map[int]bool) (keyslotParams, error) {
	id, err := h.freeSlotExcept(taken)
	if err != nil {
		return keyslotParams{}, err
	}
	taken[id] = true
	size := keyslotAreaSize(keySize)
	off, err := h.areaGap(size)
	if err != nil {
		return keyslotParams{}, err
	}
	salt := make([]byte, keyslotSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return keyslotParams{}, err
	}
	kdf := k.kdf
	kdf.salt = salt
	if p != nil {
		if kdf, err = p.forKeyslot().params(salt, keySize); err != nil {
			return keyslotParams{}, err
		}
	}
	afHash := "sha256"
	if kdf.typ == "pbkdf2" {
		afHash = kdf.hash
	}
	h.meta.areas = append(h.meta.areas, interval{off, size})
	return keyslotParams{id: id, areaOffset: off, areaSize: size, areaCipher: k.areaCipher,
		areaKeySize: k.areaKeySize, afHash: afHash, stripes: k.stripes, kdf: kdf}, nil
}

func (h *header) freeSlotExcept(taken map[int]bool) (int, error) {
	for s := 0; s < maxKeyslots; s++ {
		if h.meta.keyslots[s] == nil && !taken[s] {
			taken[s] = true
			return s, nil
		}
	}
	return -1, ErrNoFreeSlot
}

// maxAreaGap is the largest free range of the keyslots area
// (cryptsetup's LUKS2_find_area_max_gap), the first of equals.
func (h *header) maxAreaGap() (uint64, uint64) {
	start := uint64(2 * h.bin.hdrSize)
	end := start + h.meta.keyslotsSize
	used := append([]interval(nil), h.meta.areas...)
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	var bestOff, bestLen uint64
	at := start
	for _, u := range append(used, interval{end, 0}) {
		if u.off > at && u.off-at > bestLen {
			bestOff, bestLen = at, u.off-at
		}
		at = max(at, u.off+u.len)
	}
	return bestOff, bestLen
}

// freeDigestIDs returns the n lowest digest numbers not in use.
func (h *header) freeDigestIDs(n int) []int {
	var ids []int
	for id := 0; len(ids) < n; id++ {
		if h.meta.digests[id] == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// addRequirement adds req to config.requirements.mandatory.
func addRequirement(root *node, req string) {
	config := root.get("config")
	reqs := config.get("requirements")
	if reqs == nil {
		reqs = jObject()
		config.set("requirements", reqs)
	}
	mand := reqs.get("mandatory")
	if mand == nil {
		mand = jArray()
		reqs.set("mandatory", mand)
	}
	mand.push(jString(req))
}
