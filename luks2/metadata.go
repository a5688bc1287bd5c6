package luks2

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Limits of the LUKS2 metadata, as cryptsetup enforces them.
const (
	maxKeyslots     = 32
	maxTokens       = 32
	maxSegments     = 32
	maxKeyslotsSize = 128 << 20
	keyslotsAlign   = 4096
)

// metadata is the typed, validated view of the JSON tree.
type metadata struct {
	root         *node
	keyslots     map[int]*keyslot
	segments     map[int]*segment
	digests      map[int]*digest
	tokens       map[int]*node
	jsonSize     uint64
	keyslotsSize uint64
	flags        []string
	mandatory    []string
}

type kdfParams struct {
	typ        string // "pbkdf2", "argon2i", "argon2id"
	hash       string // pbkdf2
	iterations int    // pbkdf2
	time       int    // argon2
	memory     int    // argon2, KiB
	cpus       int    // argon2
	salt       []byte
}

type keyslot struct {
	id          int
	typ         string
	keySize     int
	priority    int // 0 ignore, 1 normal, 2 high
	afType      string
	stripes     int
	afHash      string
	areaType    string
	areaOffset  uint64
	areaSize    uint64
	areaCipher  string
	areaKeySize int
	kdf         kdfParams
}

type segment struct {
	id         int
	typ        string
	offset     uint64
	size       uint64 // 0 = dynamic
	ivTweak    uint64
	cipher     string
	sectorSize int
	flags      []string
}

type digest struct {
	id         int
	typ        string
	keyslots   []int
	segments   []int
	hash       string
	iterations int
	salt       []byte
	digest     []byte
}

// errMeta formats a metadata validation error.
func errMeta(format string, a ...any) error {
	return fmt.Errorf("invalid LUKS2 metadata: "+format, a...)
}

// numbered parses an object key or array entry that must be a decimal id.
func numbered(what, s string, max int) (int, error) {
	if s == "" || len(s) > 3 || len(s) > 1 && s[0] == '0' {
		return 0, errMeta("%s id %q is not a number", what, s)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errMeta("%s id %q is not a number", what, s)
		}
	}
	n, _ := strconv.Atoi(s)
	if n >= max {
		return 0, errMeta("%s id %d out of range", what, n)
	}
	return n, nil
}

func field(o *node, what, key string, kind nodeKind) (*node, error) {
	v := o.get(key)
	if v == nil {
		return nil, errMeta("%s is missing %q", what, key)
	}
	if v.kind != kind {
		return nil, errMeta("%s field %q is a %s, not a %s", what, key, v.kind, kind)
	}
	return v, nil
}

func strField(o *node, what, key string) (string, error) {
	v, err := field(o, what, key, kindString)
	if err != nil {
		return "", err
	}
	return v.str, nil
}

// u64Field reads a uint64 written as a decimal string.
func u64Field(o *node, what, key string) (uint64, error) {
	s, err := strField(o, what, key)
	if err != nil {
		return 0, err
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errMeta("%s field %q=%q is not a number", what, key, s)
		}
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errMeta("%s field %q=%q: %v", what, key, s, err)
	}
	return u, nil
}

// intField reads a JSON integer in [lo, hi].
func intField(o *node, what, key string, lo, hi int64) (int, error) {
	v, err := field(o, what, key, kindNumber)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v.str, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errMeta("%s field %q=%s out of range", what, key, v.str)
	}
	return int(n), nil
}

func b64Field(o *node, what, key string, maxLen int) ([]byte, error) {
	s, err := strField(o, what, key)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) > maxLen {
		return nil, errMeta("%s field %q is not valid base64 of at most %d bytes", what, key, maxLen)
	}
	return b, nil
}

func idArray(o *node, what, key string, max int) ([]int, error) {
	a, err := field(o, what, key, kindArray)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, v := range a.vals {
		if v.kind != kindString {
			return nil, errMeta("%s field %q holds a non-string", what, key)
		}
		id, err := numbered(what+" "+key, v.str, max)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func strArray(v *node, what string) ([]string, error) {
	if v.kind != kindArray {
		return nil, errMeta("%s is not an array", what)
	}
	var out []string
	for _, e := range v.vals {
		if e.kind != kindString {
			return nil, errMeta("%s holds a non-string", what)
		}
		out = append(out, e.str)
	}
	return out, nil
}

// parseMetadata validates the JSON tree against hdrSize (binary + JSON area)
// and builds the typed view.
func parseMetadata(root *node, hdrSize int64) (*metadata, error) {
	m := &metadata{root: root, keyslots: map[int]*keyslot{}, segments: map[int]*segment{},
		digests: map[int]*digest{}, tokens: map[int]*node{}}
	for _, k := range []string{"keyslots", "tokens", "segments", "digests", "config"} {
		if _, err := field(root, "metadata", k, kindObject); err != nil {
			return nil, err
		}
	}
	if err := m.parseConfig(root.get("config"), hdrSize); err != nil {
		return nil, err
	}
	ks := root.get("keyslots")
	for i, key := range ks.keys {
		id, err := numbered("keyslot", key, maxKeyslots)
		if err != nil {
			return nil, err
		}
		k, err := parseKeyslot(id, ks.vals[i])
		if err != nil {
			return nil, err
		}
		m.keyslots[id] = k
	}
	segs := root.get("segments")
	for i, key := range segs.keys {
		id, err := numbered("segment", key, maxSegments)
		if err != nil {
			return nil, err
		}
		s, err := parseSegment(id, segs.vals[i])
		if err != nil {
			return nil, err
		}
		m.segments[id] = s
	}
	dgs := root.get("digests")
	for i, key := range dgs.keys {
		id, err := numbered("digest", key, maxKeyslots)
		if err != nil {
			return nil, err
		}
		d, err := parseDigest(id, dgs.vals[i])
		if err != nil {
			return nil, err
		}
		m.digests[id] = d
	}
	toks := root.get("tokens")
	for i, key := range toks.keys {
		id, err := numbered("token", key, maxTokens)
		if err != nil {
			return nil, err
		}
		if err := validateToken(toks.vals[i], m); err != nil {
			return nil, err
		}
		m.tokens[id] = toks.vals[i]
	}
	if err := m.validateBindings(); err != nil {
		return nil, err
	}
	if err := m.validateAreas(hdrSize); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metadata) parseConfig(c *node, hdrSize int64) error {
	var err error
	if m.jsonSize, err = u64Field(c, "config", "json_size"); err != nil {
		return err
	}
	if m.keyslotsSize, err = u64Field(c, "config", "keyslots_size"); err != nil {
		return err
	}
	if m.jsonSize != uint64(hdrSize-binHeaderSize) {
		return errMeta("json_size %d does not match the header size %d", m.jsonSize, hdrSize)
	}
	if m.keyslotsSize%keyslotsAlign != 0 || m.keyslotsSize > maxKeyslotsSize {
		return errMeta("keyslots_size %d is not 4 KiB aligned or exceeds 128 MiB", m.keyslotsSize)
	}
	if f := c.get("flags"); f != nil {
		if m.flags, err = strArray(f, "config flags"); err != nil {
			return err
		}
	}
	if r := c.get("requirements"); r != nil {
		if r.kind != kindObject {
			return errMeta("config requirements is not an object")
		}
		if mand := r.get("mandatory"); mand != nil {
			if m.mandatory, err = strArray(mand, "mandatory requirements"); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseKeyslot(id int, o *node) (*keyslot, error) {
	what := fmt.Sprintf("keyslot %d", id)
	if o.kind != kindObject {
		return nil, errMeta("%s is not an object", what)
	}
	k := &keyslot{id: id, priority: 1}
	var err error
	if k.typ, err = strField(o, what, "type"); err != nil {
		return nil, err
	}
	if k.keySize, err = intField(o, what, "key_size", 0, 4096); err != nil {
		return nil, err
	}
	if o.get("priority") != nil {
		if k.priority, err = intField(o, what, "priority", 0, 2); err != nil {
			return nil, err
		}
	}
	if k.typ != "luks2" {
		// Other keyslot types (reencrypt) are kept but never used to unlock.
		return k, nil
	}
	af, err := field(o, what, "af", kindObject)
	if err != nil {
		return nil, err
	}
	if k.afType, err = strField(af, what+" af", "type"); err != nil {
		return nil, err
	}
	if k.afType != "luks1" {
		return nil, errMeta("%s has unknown AF type %q", what, k.afType)
	}
	if k.stripes, err = intField(af, what+" af", "stripes", 1, 1<<20); err != nil {
		return nil, err
	}
	if k.afHash, err = strField(af, what+" af", "hash"); err != nil {
		return nil, err
	}
	area, err := field(o, what, "area", kindObject)
	if err != nil {
		return nil, err
	}
	if k.areaType, err = strField(area, what+" area", "type"); err != nil {
		return nil, err
	}
	if k.areaType != "raw" {
		return nil, errMeta("%s has unknown area type %q", what, k.areaType)
	}
	if k.areaOffset, err = u64Field(area, what+" area", "offset"); err != nil {
		return nil, err
	}
	if k.areaSize, err = u64Field(area, what+" area", "size"); err != nil {
		return nil, err
	}
	if k.areaCipher, err = strField(area, what+" area", "encryption"); err != nil {
		return nil, err
	}
	if k.areaKeySize, err = intField(area, what+" area", "key_size", 0, 4096); err != nil {
		return nil, err
	}
	kdf, err := field(o, what, "kdf", kindObject)
	if err != nil {
		return nil, err
	}
	if k.kdf, err = parseKDF(kdf, what+" kdf"); err != nil {
		return nil, err
	}
	if uint64(k.keySize)*uint64(k.stripes) > k.areaSize {
		return nil, errMeta("%s area of %d bytes is too small for %d stripes of %d bytes", what, k.areaSize, k.stripes, k.keySize)
	}
	return k, nil
}

func parseKDF(o *node, what string) (kdfParams, error) {
	var p kdfParams
	var err error
	if p.typ, err = strField(o, what, "type"); err != nil {
		return p, err
	}
	if p.salt, err = b64Field(o, what, "salt", 1024); err != nil {
		return p, err
	}
	switch p.typ {
	case "pbkdf2":
		if p.hash, err = strField(o, what, "hash"); err != nil {
			return p, err
		}
		if p.iterations, err = intField(o, what, "iterations", 1, 1<<32-1); err != nil {
			return p, err
		}
	case "argon2i", "argon2id", "argon2": // "argon2": early LUKS2 headers; dumped, not unlocked
		if p.time, err = intField(o, what, "time", 1, 1<<32-1); err != nil {
			return p, err
		}
		if p.memory, err = intField(o, what, "memory", 1, 4<<20); err != nil {
			return p, err
		}
		if p.cpus, err = intField(o, what, "cpus", 1, 255); err != nil {
			return p, err
		}
	default:
		return p, errMeta("%s has unknown type %q", what, p.typ)
	}
	return p, nil
}

func parseSegment(id int, o *node) (*segment, error) {
	what := fmt.Sprintf("segment %d", id)
	if o.kind != kindObject {
		return nil, errMeta("%s is not an object", what)
	}
	s := &segment{id: id}
	var err error
	if s.typ, err = strField(o, what, "type"); err != nil {
		return nil, err
	}
	if s.offset, err = u64Field(o, what, "offset"); err != nil {
		return nil, err
	}
	size, err := strField(o, what, "size")
	if err != nil {
		return nil, err
	}
	if size != "dynamic" {
		if s.size, err = u64Field(o, what, "size"); err != nil {
			return nil, err
		}
		if s.size == 0 {
			return nil, errMeta("%s has size 0", what)
		}
	}
	if s.offset%512 != 0 || s.size%512 != 0 {
		return nil, errMeta("%s offset or size not aligned to 512 bytes", what)
	}
	if f := o.get("flags"); f != nil {
		if s.flags, err = strArray(f, what+" flags"); err != nil {
			return nil, err
		}
	}
	if s.typ != "crypt" {
		return s, nil
	}
	if s.ivTweak, err = u64Field(o, what, "iv_tweak"); err != nil {
		return nil, err
	}
	if s.cipher, err = strField(o, what, "encryption"); err != nil {
		return nil, err
	}
	if s.sectorSize, err = intField(o, what, "sector_size", 0, 1<<32-1); err != nil {
		return nil, err
	}
	if s.sectorSize == 0 || s.sectorSize%512 != 0 {
		return nil, errMeta("%s has illegal sector size %d", what, s.sectorSize)
	}
	if s.size%uint64(s.sectorSize) != 0 {
		return nil, errMeta("%s size is not aligned to its sector size", what)
	}
	return s, nil
}

func parseDigest(id int, o *node) (*digest, error) {
	what := fmt.Sprintf("digest %d", id)
	if o.kind != kindObject {
		return nil, errMeta("%s is not an object", what)
	}
	d := &digest{id: id}
	var err error
	if d.typ, err = strField(o, what, "type"); err != nil {
		return nil, err
	}
	if d.keyslots, err = idArray(o, what, "keyslots", maxKeyslots); err != nil {
		return nil, err
	}
	if d.segments, err = idArray(o, what, "segments", maxSegments); err != nil {
		return nil, err
	}
	if d.typ != "pbkdf2" {
		return nil, errMeta("%s has unknown type %q", what, d.typ)
	}
	if d.hash, err = strField(o, what, "hash"); err != nil {
		return nil, err
	}
	if d.iterations, err = intField(o, what, "iterations", 1, 1<<32-1); err != nil {
		return nil, err
	}
	if d.salt, err = b64Field(o, what, "salt", 1024); err != nil {
		return nil, err
	}
	if d.digest, err = b64Field(o, what, "digest", 1024); err != nil {
		return nil, err
	}
	if len(d.digest) == 0 {
		return nil, errMeta("%s is empty", what)
	}
	return d, nil
}

func validateToken(o *node, m *metadata) error {
	if o.kind != kindObject {
		return errMeta("token is not an object")
	}
	if _, err := strField(o, "token", "type"); err != nil {
		return err
	}
	ids, err := idArray(o, "token", "keyslots", maxKeyslots)
	if err != nil {
		return err
	}
	_ = ids
	return nil
}

// validateBindings checks that digests and tokens name existing keyslots
// and segments, and that every crypt segment has a digest.
func (m *metadata) validateBindings() error {
	for _, d := range m.digests {
		for _, k := range d.keyslots {
			if m.keyslots[k] == nil {
				return errMeta("digest %d names missing keyslot %d", d.id, k)
			}
		}
		for _, s := range d.segments {
			if m.segments[s] == nil {
				return errMeta("digest %d names missing segment %d", d.id, s)
			}
		}
	}
	for id, k := range m.keyslots {
		n := 0
		for _, d := range m.digests {
			for _, x := range d.keyslots {
				if x == id {
					n++
				}
			}
		}
		if n > 1 {
			return errMeta("keyslot %d is bound to %d digests", id, n)
		}
		_ = k
	}
	for _, s := range m.segments {
		if s.typ != "crypt" {
			continue
		}
		if m.segmentDigest(s.id) == nil {
			return errMeta("segment %d has no digest", s.id)
		}
	}
	for _, t := range m.tokens {
		ids, _ := idArray(t, "token", "keyslots", maxKeyslots)
		for _, k := range ids {
			if m.keyslots[k] == nil {
				return errMeta("token names missing keyslot %d", k)
			}
		}
	}
	return nil
}

// validateAreas checks that keyslot areas lie inside the keyslots area and
// do not overlap, and that segments start after it.
func (m *metadata) validateAreas(hdrSize int64) error {
	start := uint64(2 * hdrSize)
	end := start + m.keyslotsSize
	type iv struct {
		off, len uint64
		id       int
	}
	var areas []iv
	for _, k := range m.keyslots {
		if k.typ != "luks2" {
			continue
		}
		if k.areaSize == 0 || k.areaOffset < start || k.areaOffset > end || k.areaSize > end-k.areaOffset {
			return errMeta("keyslot %d area [%d, +%d) is outside the keyslots area [%d, %d)", k.id, k.areaOffset, k.areaSize, start, end)
		}
		areas = append(areas, iv{k.areaOffset, k.areaSize, k.id})
	}
	sort.Slice(areas, func(i, j int) bool { return areas[i].off < areas[j].off })
	for i := 1; i < len(areas); i++ {
		if areas[i-1].off+areas[i-1].len > areas[i].off {
			return errMeta("keyslot %d area overlaps keyslot %d area", areas[i].id, areas[i-1].id)
		}
	}
	var segs []iv
	for _, s := range m.segments {
		if s.offset != 0 && s.offset < end {
			return errMeta("segment %d at offset %d overlaps the metadata or keyslots area", s.id, s.offset)
		}
		segs = append(segs, iv{s.offset, s.size, s.id})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].off < segs[j].off })
	for i := 1; i < len(segs); i++ {
		p := segs[i-1]
		if p.len == 0 || p.off+p.len > segs[i].off {
			return errMeta("segment %d overlaps segment %d", segs[i].id, p.id)
		}
	}
	return nil
}

// segmentDigest returns the digest bound to segment id.
func (m *metadata) segmentDigest(id int) *digest {
	for _, d := range m.digests {
		for _, s := range d.segments {
			if s == id {
				return d
			}
		}
	}
	return nil
}

// keyslotDigest returns the digest bound to keyslot id.
func (m *metadata) keyslotDigest(id int) *digest {
	for _, d := range m.digests {
		for _, k := range d.keyslots {
			if k == id {
				return d
			}
		}
	}
	return nil
}

// dataSegment returns segment 0 (cryptsetup's data segment when no
// reencryption is running).
func (m *metadata) dataSegment() (*segment, error) {
	s := m.segments[0]
	if s == nil {
		// The lowest-numbered segment.
		ids := sortedIDs(m.segments)
		if len(ids) == 0 {
			return nil, errors.New("LUKS2 header has no data segment")
		}
		s = m.segments[ids[0]]
	}
	return s, nil
}

func sortedIDs[T any](m map[int]T) []int {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
