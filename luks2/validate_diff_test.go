package luks2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// Which header copy cryptsetup uses is decided by its validation of each
// copy (lib/luks2/luks2_json_metadata.c, LUKS2_hdr_validate): these tests
// mutate one thing in the primary copy of a cryptsetup-made header, give it
// a seqid above the untouched secondary's, and require luksd to use the
// copy cryptsetup uses (luksDump's Epoch tells which).

var (
	diffOnce sync.Once
	diffImg  []byte
	diffJSON string
	diffErr  error
)

// diffBase returns a cryptsetup-made LUKS2 image (keyslots 0 and 1, a
// luks2-keyring token) and its compact JSON.
func diffBase(t *testing.T) ([]byte, string) {
	t.Helper()
	diffOnce.Do(func() {
		img := testtool.Image(t, 20<<20)
		key := testtool.KeyFile(t, []byte("diff"))
		for _, args := range [][]string{
			{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", img, key},
			{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-d", key, img, key},
			{"token", "add", "--key-description", "diff:token", img},
		} {
			if out, err := testtool.Output(t, "cryptsetup", args...); err != nil {
				diffErr = fmt.Errorf("cryptsetup %v: %v: %s", args, err, out)
				return
			}
		}
		diffImg, diffErr = os.ReadFile(img)
		if diffErr == nil {
			diffJSON = strings.TrimRight(string(diffImg[binHeaderSize:16384]), "\x00")
		}
	})
	if diffErr != nil {
		t.Fatal(diffErr)
	}
	return append([]byte(nil), diffImg...), diffJSON
}

// withPrimary returns img with its primary copy's JSON area holding js and
// its binary header changed by bin, seqid one above the secondary's, the
// checksum (by the header's checksum_alg) valid.
func withPrimary(t *testing.T, img []byte, js string, bin func(raw []byte)) []byte {
	t.Helper()
	img = append([]byte(nil), img...)
	area := img[binHeaderSize:16384]
	if len(js) > len(area) {
		t.Fatalf("JSON of %d bytes does not fit", len(js))
	}
	clear(area)
	copy(area, js)
	raw := img[:binHeaderSize]
	binary.BigEndian.PutUint64(raw[offSeqID:], binary.BigEndian.Uint64(raw[offSeqID:])+1)
	if bin != nil {
		bin(raw)
	}
	clear(raw[offCsum : offCsum+csumLen])
	h, err := csumHash(cString(raw[offCsumAlg : offCsumAlg+csumAlgLen]))
	if err != nil {
		t.Fatal(err)
	}
	h.Write(raw)
	h.Write(area)
	copy(raw[offCsum:], h.Sum(nil))
	return img
}

var epochLine = regexp.MustCompile(`(?m)^Epoch:\s+(\d+)$`)

// cryptsetupEpoch returns the seqid of the copy cryptsetup uses for img
// (locks disabled: cryptsetup then repairs nothing), or -1.
func cryptsetupEpoch(t *testing.T, img []byte) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "copy.img")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testtool.Output(t, "cryptsetup", "luksDump", "--disable-locks", p)
	if err != nil {
		return -1
	}
	m := epochLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no Epoch in cryptsetup's dump:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// luksdEpoch returns the seqid of the copy luksd uses for img, or -1.
func luksdEpoch(img []byte) (int, error) {
	h, err := Read(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		return -1, err
	}
	return int(h.impl.(*header).bin.seqID), nil
}

// jsonEdit is a mutation of the metadata tree.
type jsonEdit func(r *node)

func setIn(path string, v *node) jsonEdit {
	return func(r *node) {
		keys := strings.Split(path, "/")
		n := r
		for _, k := range keys[:len(keys)-1] {
			n = n.get(k)
		}
		n.set(keys[len(keys)-1], v)
	}
}

func delIn(path string) jsonEdit {
	return func(r *node) {
		keys := strings.Split(path, "/")
		n := r
		for _, k := range keys[:len(keys)-1] {
			n = n.get(k)
		}
		n.del(keys[len(keys)-1])
	}
}

// rename renames object key old to new under path.
func rename(path, old, new string) jsonEdit {
	return func(r *node) {
		n := r
		for _, k := range strings.Split(path, "/") {
			n = n.get(k)
		}
		for i, k := range n.keys {
			if k == old {
				n.keys[i] = new
			}
		}
	}
}

func edits(es ...jsonEdit) jsonEdit {
	return func(r *node) {
		for _, e := range es {
			e(r)
		}
	}
}

func strs(s ...string) *node {
	a := jArray()
	for _, x := range s {
		a.push(jString(x))
	}
	return a
}

func nested(depth int) *node {
	n := jArray()
	for i := 1; i < depth; i++ {
		n = jArray(n)
	}
	return n
}

// copyCase is one mutation of the primary copy.
type copyCase struct {
	name string
	edit jsonEdit               // on the tree, or
	text func(js string) string // on the JSON text
	bin  func(raw []byte)       // on the binary header
}

// ks1 is the path of the keyslot the cases edit.
const ks1 = "keyslots/1"

// copyCases are the damages to the primary copy on which luksd must pick
// the copy cryptsetup picks.
var copyCases = []copyCase{
	{name: "unchanged"},
	// Named by the issue: cryptsetup refuses these primaries...
	{name: "digest without keyslots", edit: setIn("digests/0/keyslots", strs())},
	{name: "segment with empty encryption", edit: setIn("segments/0/encryption", jString(""))},
	{name: "JSON after a space", text: func(js string) string { return " " + js }},
	{name: "no segment 0", edit: edits(rename("segments", "0", "1"), setIn("digests/0/segments", strs("1")))},
	// ... and accepts these.
	{name: "keyslot 32", edit: edits(rename("keyslots", "1", "32"), setIn("digests/0/keyslots", strs("0", "32")), setIn("tokens/0/keyslots", strs("0", "32")))},
	{name: "token 32", edit: rename("tokens", "0", "32")},
	{name: "md5 checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "md5") }},
	// The JSON area.
	{name: "whitespace after the JSON", text: func(js string) string { return js + " " }},
	{name: "newline after the JSON", text: func(js string) string { return js + "\n" }},
	{name: "garbage after a NUL", text: func(js string) string { return js + "\x00x" }},
	{name: "two objects", text: func(js string) string { return js + "{}" }},
	{name: "whitespace inside", text: func(js string) string { return strings.Replace(js, ",", " ,\n\t", 3) }},
	{name: "duplicate key", text: func(js string) string {
		return strings.Replace(js, `"config":{`, `"config":{"json_size":"1",`, 1)
	}},
	{name: "comment", text: func(js string) string { return strings.Replace(js, `"config":{`, `"config":/* c */{`, 1) }},
	{name: "line comment", text: func(js string) string { return strings.Replace(js, `"config":{`, "\"config\"://c\n{", 1) }},
	{name: "single quotes", text: func(js string) string {
		return strings.Replace(js, `"type":"luks2-keyring"`, `"type":'luks2-keyring'`, 1)
	}},
	{name: "trailing comma", text: func(js string) string { return strings.Replace(js, `"keyslots":["0","1"]`, `"keyslots":["0","1",]`, 1) }},
	{name: "upper-case literal", edit: setIn("tokens/0/x", &node{kind: kindBool, b: true}), text: func(js string) string { return strings.Replace(js, "true", "TRUE", 1) }},
	{name: "leading zeros", text: func(js string) string { return strings.Replace(js, `"key_size":64`, `"key_size":0064`, 1) }},
	{name: "number then a letter", text: func(js string) string { return strings.Replace(js, `"key_size":64`, `"key_size":64x`, 1) }},
	{name: "exponent", text: func(js string) string { return strings.Replace(js, `"key_size":64`, `"key_size":6.4e1`, 1) }},
	{name: "Infinity", text: func(js string) string {
		return strings.Replace(js, `"key_description"`, `"x":-Infinity,"key_description"`, 1)
	}},
	{name: "NaN", text: func(js string) string {
		return strings.Replace(js, `"key_description"`, `"x":NaN,"key_description"`, 1)
	}},
	{name: "unicode escape", edit: setIn("tokens/0/key_description", jString("é\u2028")), text: func(js string) string { return strings.Replace(js, "é", `\u00e9`, 1) }},
	{name: "invalid UTF-8", text: func(js string) string { return strings.Replace(js, "diff:token", "diff:\xff\xfe", 1) }},
	{name: "control character in a string", text: func(js string) string { return strings.Replace(js, "diff:token", "diff:\x01", 1) }},
	{name: "token nested 14 deep", edit: setIn("tokens/0/x", nested(14))},
	{name: "token nested 28 deep", edit: setIn("tokens/0/x", nested(28))},
	{name: "token nested 29 deep", edit: setIn("tokens/0/x", nested(29))},
	{name: "token nested 30 deep", edit: setIn("tokens/0/x", nested(30))},
	{name: "token nested 40 deep", edit: setIn("tokens/0/x", nested(40))},
	{name: "not an object", text: func(string) string { return "[1]" }},
	// Keyslots: the generic checks, and luks2 keyslots' own.
	{name: "keyslot 01", edit: edits(rename("keyslots", "1", "01"), setIn("digests/0/keyslots", strs("0", "01")), setIn("tokens/0/keyslots", strs("0", "01")))},
	{name: "keyslot named 1x", edit: edits(rename("keyslots", "1", "1x"), setIn("digests/0/keyslots", strs("0", "1x")), setIn("tokens/0/keyslots", strs("0", "1x")))},
	{name: "keyslot 32 still named 1 by the digest", edit: rename("keyslots", "1", "32")},
	{name: "keyslot without type", edit: delIn(ks1 + "/type")},
	{name: "keyslot of unknown type", edit: setIn(ks1+"/type", jString("future"))},
	{name: "keyslot key_size 4097", edit: setIn(ks1+"/key_size", jInt(4097))},
	{name: "keyslot key_size 4294967296", edit: setIn(ks1+"/key_size", jInt(1<<32))},
	{name: "keyslot key_size -1", edit: setIn(ks1+"/key_size", jInt(-1))},
	{name: "keyslot key_size string", edit: setIn(ks1+"/key_size", jString("64"))},
	{name: "keyslot key_size 64.0", edit: setIn(ks1+"/key_size", &node{kind: kindNumber, str: "64.0"})},
	{name: "keyslot priority 5", edit: setIn(ks1+"/priority", jInt(5))},
	{name: "keyslot priority string", edit: setIn(ks1+"/priority", jString("2"))},
	{name: "keyslot stripes 0", edit: setIn(ks1+"/af/stripes", jInt(0))},
	{name: "keyslot stripes string", edit: setIn(ks1+"/af/stripes", jString("4000"))},
	{name: "keyslot af type luks2", edit: setIn(ks1+"/af/type", jString("luks2"))},
	{name: "keyslot iterations 0", edit: setIn(ks1+"/kdf/iterations", jInt(0))},
	{name: "keyslot iterations 2^32", edit: setIn(ks1+"/kdf/iterations", jInt(1<<32))},
	{name: "keyslot kdf of unknown type", edit: setIn(ks1+"/kdf/type", jString("scrypt"))},
	{name: "keyslot kdf with an extra field", edit: setIn(ks1+"/kdf/x", jInt(1))},
	{name: "keyslot kdf without hash", edit: delIn(ks1 + "/kdf/hash")},
	{name: "keyslot kdf salt not base64", edit: setIn(ks1+"/kdf/salt", jString("!!"))},
	{name: "keyslot without kdf", edit: delIn(ks1 + "/kdf")},
	{name: "keyslot area type other", edit: setIn(ks1+"/area/type", jString("journal"))},
	{name: "keyslot area offset with a space", edit: setIn(ks1+"/area/offset", jString(" 290816"))},
	{name: "keyslot area size 0", edit: setIn(ks1+"/area/size", jString("0"))},
	{name: "keyslot area overlapping", edit: setIn(ks1+"/area/offset", jString("36864"))},
	{name: "keyslot area past the keyslots area", edit: setIn(ks1+"/area/offset", jString("16773120"))},
	{name: "keyslot area encryption empty", edit: setIn(ks1+"/area/encryption", jString(""))},
	{name: "keyslot area encryption unknown", edit: setIn(ks1+"/area/encryption", jString("rot13-ecb"))},
	{name: "keyslot area key_size 0", edit: setIn(ks1+"/area/key_size", jInt(0))},
	{name: "keyslot in no digest", edit: setIn("digests/0/keyslots", strs("0"))},
	{name: "keyslot in two digests", edit: setIn("digests/1", obj("type", jString("pbkdf2"), "keyslots", strs("1"), "segments", strs()))},
	// Digests: only their references are checked at load.
	{name: "digest of unknown type", edit: setIn("digests/0/type", jString("argon2"))},
	{name: "digest without hash", edit: delIn("digests/0/hash")},
	{name: "digest naming a missing segment", edit: setIn("digests/0/segments", strs("0", "5"))},
	{name: "digest keyslots with a number", edit: setIn("digests/0/keyslots", jArray(jString("0"), jInt(1)))},
	// Segments.
	{name: "segment of other type", edit: setIn("segments/0/type", jString("linear"))},
	{name: "segment size 0", edit: setIn("segments/0/size", jString("0"))},
	{name: "segment offset unaligned", edit: setIn("segments/0/offset", jString("16777217"))},
	{name: "segment inside the keyslots area", edit: setIn("segments/0/offset", jString("1048576"))},
	{name: "segment iv_tweak not a number", edit: setIn("segments/0/iv_tweak", jString("x"))},
	{name: "segment sector_size 1024", edit: setIn("segments/0/sector_size", jInt(1024))},
	{name: "segment sector_size 1536", edit: setIn("segments/0/sector_size", jInt(1536))},
	{name: "segment sector_size 8192", edit: setIn("segments/0/sector_size", jInt(8192))},
	{name: "segment sector_size 4097", edit: setIn("segments/0/sector_size", jInt(4097))},
	{name: "segment backup only", edit: setIn("segments/0/flags", strs("backup-previous"))},
	{name: "segment flags not strings", edit: setIn("segments/0/flags", jArray(jInt(1)))},
	{name: "segment 00", edit: edits(rename("segments", "0", "00"), setIn("digests/0/segments", strs("00")))},
	{name: "two dynamic segments", edit: edits(setIn("segments/1", obj("type", jString("linear"), "offset", jString("33554432"), "size", jString("dynamic"))))},
	{name: "crypt segment without digest", edit: setIn("digests/0/segments", strs())},
	// Tokens.
	{name: "token of empty type", edit: setIn("tokens/0/type", jString(""))},
	{name: "token naming a missing keyslot", edit: setIn("tokens/0/keyslots", strs("0", "9"))},
	{name: "token without keyslots", edit: delIn("tokens/0/keyslots")},
	// Config.
	{name: "json_size with a space", edit: setIn("config/json_size", jString(" 12288"))},
	{name: "json_size wrong", edit: setIn("config/json_size", jString("4096"))},
	{name: "keyslots_size unaligned", edit: setIn("config/keyslots_size", jString("16744447"))},
	{name: "keyslots_size too large for the data offset", edit: setIn("config/keyslots_size", jString("16748544"))},
	{name: "config flags unknown", edit: setIn("config/flags", strs("allow-discards", "future-flag"))},
	{name: "config flags not an array", edit: setIn("config/flags", jString("allow-discards"))},
	{name: "unknown mandatory requirement", edit: setIn("config/requirements", obj("mandatory", strs("future")))},
	{name: "two reencryption requirements", edit: setIn("config/requirements", obj("mandatory", strs("online-reencrypt", "online-reencrypt-v2")))},
	{name: "requirements not an object", edit: setIn("config/requirements", strs("future"))},
	{name: "no config", edit: delIn("config")},
	// Binary header fields.
	{name: "sha1 checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "sha1") }},
	{name: "sha512 checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "sha512") }},
	{name: "whirlpool checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "whirlpool") }},
	{name: "ripemd160 checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "ripemd160") }},
	{name: "sha3-256 checksum", bin: func(raw []byte) { clear(raw[offCsumAlg : offCsumAlg+csumAlgLen]); copy(raw[offCsumAlg:], "sha3-256") }},
	{name: "version 3", bin: func(raw []byte) { binary.BigEndian.PutUint16(raw[offVersion:], 3) }},
	{name: "label of 48 bytes", bin: func(raw []byte) { copy(raw[offLabel:offLabel+labelLen], strings.Repeat("L", labelLen)) }},
}

func TestCopySelectionLikeCryptsetup(t *testing.T) {
	base, js := diffBase(t)
	seq := int(binary.BigEndian.Uint64(base[offSeqID:]))
	for _, tc := range copyCases {
		t.Run(tc.name, func(t *testing.T) {
			text := js
			if tc.edit != nil {
				root, err := parseJSON([]byte(js))
				if err != nil {
					t.Fatal(err)
				}
				tc.edit(root)
				text = string(root.compact())
			}
			if tc.text != nil {
				text = tc.text(text)
			}
			img := withPrimary(t, base, text, tc.bin)
			cs := cryptsetupEpoch(t, img)
			got, err := luksdEpoch(img)
			if got != cs {
				which := map[int]string{seq: "secondary", seq + 1: "primary", -1: "neither"}
				t.Errorf("luksd uses the %s copy (%v), cryptsetup the %s", which[got], err, which[cs])
			}
		})
	}
}
