package luks2

import (
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strconv"
)

// Limits of the LUKS2 metadata, as cryptsetup enforces them.
const (
	maxTokens       = 32
	maxSegments     = 32
	maxDigests      = 8 // LUKS2_DIGEST_MAX: luksDump shows digests 0..7
	maxKeyslotsSize = 128 << 20
	keyslotsAlign   = 4096
)

// metadata is the typed view of a validated JSON tree. It holds what
// cryptsetup addresses by number (keys written as a plain decimal); its
// fields are read as cryptsetup reads them when it uses them, so an odd
// keyslot is built here and refused only when it is used.
type metadata struct {
	root         *node
	keyslots     map[int]*keyslot
	segments     map[int]*segment
	digests      map[int]*digest
	tokens       map[int]*node
	areas        []interval // every keyslot's area, addressable or not
	jsonSize     uint64
	keyslotsSize uint64
	flags        []string
	mandatory    []string
}

type kdfParams struct {
	typ        string // "pbkdf2", "argon2i", "argon2id", or what the header says
	hash       string // pbkdf2
	iterations int    // pbkdf2
	time       int    // argon2
	memory     int    // argon2, KiB
	cpus       int    // argon2
	salt       []byte
	saltErr    error // the salt is not base64
}

type keyslot struct {
	id          int
	obj         *node
	typ         string
	keySize     int
	priority    int // 0 ignore, 1 normal, 2 high; other values are never tried
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
	err        error // a field is missing or not base64
}

// parseMetadata validates the JSON tree of a header whose copies are
// hdrSize bytes (binary header and JSON area) as cryptsetup does, and
// builds the typed view.
func parseMetadata(root *node, hdrSize int64) (*metadata, error) {
	if err := validateHeader(root, uint64(hdrSize-binHeaderSize)); err != nil {
		return nil, err
	}
	return buildMetadata(root), nil
}

// addressable returns the number cryptsetup reaches key by ("%u" of it),
// or false for a key it never reaches ("01", "99999999999").
func addressable(key string) (int, bool) {
	n, err := strconv.Atoi(key)
	return n, err == nil && n >= 0 && n <= 1<<31-1 && strconv.Itoa(n) == key
}

// buildMetadata builds the typed view of a validated tree.
func buildMetadata(root *node) *metadata {
	m := &metadata{root: root, keyslots: map[int]*keyslot{}, segments: map[int]*segment{},
		digests: map[int]*digest{}, tokens: map[int]*node{}}
	config := root.get("config")
	m.jsonSize, _ = strToUint64(config.get("json_size").str)
	m.keyslotsSize, _ = strToUint64(config.get("keyslots_size").str)
	if f := config.get("flags"); f != nil {
		m.flags = textsOf(f)
	}
	if mand := config.get("requirements").get("mandatory"); mand != nil {
		m.mandatory = textsOf(mand)
	}
	ks := root.get("keyslots")
	for i, key := range ks.keys {
		k := buildKeyslot(ks.vals[i])
		m.areas = append(m.areas, interval{k.areaOffset, k.areaSize})
		if id, ok := addressable(key); ok {
			k.id = id
			m.keyslots[id] = k
		}
	}
	segs := root.get("segments")
	for i, key := range segs.keys {
		if id, ok := addressable(key); ok {
			m.segments[id] = buildSegment(id, segs.vals[i])
		}
	}
	dgs := root.get("digests")
	for i, key := range dgs.keys {
		if id, ok := addressable(key); ok {
			m.digests[id] = buildDigest(id, dgs.vals[i])
		}
	}
	toks := root.get("tokens")
	for i, key := range toks.keys {
		if id, ok := addressable(key); ok {
			m.tokens[id] = toks.vals[i]
		}
	}
	return m
}

// textsOf returns the strings of an array (json_object_get_string of each).
func textsOf(a *node) []string {
	var out []string
	for _, v := range a.vals {
		out = append(out, jsonText(v))
	}
	return out
}

func buildKeyslot(o *node) *keyslot {
	k := &keyslot{obj: o, typ: jsonText(o.get("type")), keySize: int(int64Of(o.get("key_size"))), priority: 1}
	if p := o.get("priority"); p != nil {
		k.priority = int(intOf(p))
	}
	if af := o.get("af"); af != nil {
		k.afType, k.afHash = jsonText(af.get("type")), jsonText(af.get("hash"))
		k.stripes = int(intOf(af.get("stripes")))
	}
	if area := o.get("area"); area != nil {
		k.areaType = jsonText(area.get("type"))
		k.areaOffset, k.areaSize = uint64Field(area, "offset"), uint64Field(area, "size")
		k.areaCipher = jsonText(area.get("encryption"))
		k.areaKeySize = int(intOf(area.get("key_size")))
	}
	if kdf := o.get("kdf"); kdf != nil {
		k.kdf = kdfParams{typ: jsonText(kdf.get("type")), hash: jsonText(kdf.get("hash")),
			iterations: int(intOf(kdf.get("iterations"))), time: int(intOf(kdf.get("time"))),
			memory: int(intOf(kdf.get("memory"))), cpus: int(intOf(kdf.get("cpus")))}
		k.kdf.salt, k.kdf.saltErr = base64Field(kdf.get("salt"))
	}
	return k
}

// base64Field decodes a base64 string field (nil when missing).
func base64Field(n *node) ([]byte, error) {
	if n == nil || n.kind != kindString {
		return nil, errors.New("missing")
	}
	return base64.StdEncoding.DecodeString(cstr(n.str))
}

func buildSegment(id int, o *node) *segment {
	s := &segment{id: id, typ: jsonText(o.get("type")), offset: segmentOffset(o), size: segmentSize(o),
		ivTweak: uint64Field(o, "iv_tweak"), cipher: jsonText(o.get("encryption")),
		sectorSize: int(intOf(o.get("sector_size")))}
	if f := o.get("flags"); f != nil {
		s.flags = textsOf(f)
	}
	return s
}

func buildDigest(id int, o *node) *digest {
	d := &digest{id: id, typ: jsonText(o.get("type")), hash: jsonText(o.get("hash")),
		iterations: int(intOf(o.get("iterations")))}
	d.keyslots = addressableRefs(o.get("keyslots"))
	d.segments = addressableRefs(o.get("segments"))
	var err1, err2 error
	d.salt, err1 = base64Field(o.get("salt"))
	d.digest, err2 = base64Field(o.get("digest"))
	if d.typ != "pbkdf2" || o.get("hash") == nil || o.get("iterations") == nil || err1 != nil || err2 != nil {
		d.err = errors.New("malformed digest")
	}
	return d
}

// addressableRefs are the numbers an array of keyslot or segment names
// refers to, as cryptsetup finds them ("%u" of the number).
func addressableRefs(a *node) []int {
	var ids []int
	if a == nil {
		return nil
	}
	for _, v := range a.vals {
		if id, ok := addressable(cstr(v.str)); ok && v.kind == kindString {
			ids = append(ids, id)
		}
	}
	return ids
}

// segmentDigest returns the digest bound to segment id.
func (m *metadata) segmentDigest(id int) *digest {
	return m.digestNaming(id, func(d *digest) []int { return d.segments })
}

// keyslotDigest returns the digest bound to keyslot id.
func (m *metadata) keyslotDigest(id int) *digest {
	return m.digestNaming(id, func(d *digest) []int { return d.keyslots })
}

// digestNaming returns the first digest, by id, whose list names id.
func (m *metadata) digestNaming(id int, list func(*digest) []int) *digest {
	for _, did := range sortedIDs(m.digests) {
		if d := m.digests[did]; slices.Contains(list(d), id) {
			return d
		}
	}
	return nil
}

// dataSegment returns the segment whose key opens the volume, as
// cryptsetup's LUKS2_get_default_segment: the one flagged backup-final
// while a reencryption runs, else segment 0 (validation makes sure it
// exists).
func (m *metadata) dataSegment() (*segment, error) {
	for _, id := range sortedIDs(m.segments) {
		if slicesContains(m.segments[id].flags, "backup-final") {
			return m.segments[id], nil
		}
	}
	if s := m.segments[0]; s != nil {
		return s, nil
	}
	return nil, errors.New("LUKS2 header has no data segment")
}

func sortedIDs[T any](m map[int]T) []int {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
