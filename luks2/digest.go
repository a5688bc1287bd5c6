package luks2

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
)

// verify reports whether vk matches the pbkdf2 digest. LUKS1-converted
// headers carry 20-byte digests; the length comes from the stored digest.
// A digest cryptsetup cannot check either (not pbkdf2, a field missing or
// broken) is ErrKeyslotOpen.
func (d *digest) verify(vk []byte) (bool, error) {
	if d.err != nil || d.iterations < 1 || len(d.digest) == 0 {
		return false, fmt.Errorf("%w: digest %d is malformed", ErrKeyslotOpen, d.id)
	}
	h, err := hashFunc(d.hash)
	if err != nil {
		return false, fmt.Errorf("%w: digest %d: %v", ErrKeyslotOpen, d.id, err)
	}
	sum, err := pbkdf2.Key(h, string(vk), d.salt, d.iterations, len(d.digest))
	if err != nil {
		return false, fmt.Errorf("%w: digest %d: %v", ErrKeyslotOpen, d.id, err)
	}
	return subtle.ConstantTimeCompare(sum, d.digest) == 1, nil
}

// newDigestNode builds a "pbkdf2" digest object for vk bound to keyslots and
// segments, in cryptsetup's field order.
func newDigestNode(vk []byte, hashName string, iterations int, keyslots, segments []int) (*node, error) {
	h, err := hashFunc(hashName)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	sum, err := pbkdf2.Key(h, string(vk), salt, iterations, h().Size())
	if err != nil {
		return nil, err
	}
	return obj(
		"type", jString("pbkdf2"),
		"keyslots", idsNode(keyslots),
		"segments", idsNode(segments),
		"hash", jString(hashName),
		"iterations", jInt(int64(iterations)),
		"salt", jString(base64.StdEncoding.EncodeToString(salt)),
		"digest", jString(base64.StdEncoding.EncodeToString(sum)),
	), nil
}

func idsNode(ids []int) *node {
	a := jArray()
	for _, id := range ids {
		v := jString(strconv.Itoa(id))
		v.parent = a
		a.vals = append(a.vals, v)
	}
	return a
}
