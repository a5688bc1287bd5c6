package luks2

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"hash"
)

// The LUKS anti-forensic splitter: the key is spread over stripes blocks so
// that losing any part of the area loses the key. Merge XORs and diffuses
// all blocks but the last, whose XOR with the result is the key.

// afSize is the byte length of keySize*stripes rounded up to 512-byte sectors.
func afSize(keySize, stripes int) int {
	n := keySize * stripes
	return (n + 511) / 512 * 512
}

// diffuse replaces buf by hash(BE32(i) || block i) for each digest-sized block.
func diffuse(buf []byte, newHash func() hash.Hash) {
	h := newHash()
	ds := h.Size()
	var idx [4]byte
	for i, off := 0, 0; off < len(buf); i, off = i+1, off+ds {
		end := min(off+ds, len(buf))
		h.Reset()
		binary.BigEndian.PutUint32(idx[:], uint32(i))
		h.Write(idx[:])
		h.Write(buf[off:end])
		sum := h.Sum(nil)
		copy(buf[off:end], sum)
		clear(sum)
	}
}

// afMerge recovers the key of keySize bytes from the stripes blocks in src.
func afMerge(src []byte, keySize, stripes int, newHash func() hash.Hash) ([]byte, error) {
	if stripes < 1 || keySize <= 0 || len(src) < keySize*stripes {
		return nil, errors.New("keyslot material is shorter than its stripes")
	}
	d := make([]byte, keySize)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, src[i*keySize:(i+1)*keySize])
		diffuse(d, newHash)
	}
	xorInto(d, src[(stripes-1)*keySize:stripes*keySize])
	return d, nil
}

// afSplit spreads key over stripes blocks of random data into dst
// (len >= len(key)*stripes).
func afSplit(dst, key []byte, stripes int, newHash func() hash.Hash) error {
	ks := len(key)
	if _, err := rand.Read(dst[:ks*(stripes-1)]); err != nil {
		return err
	}
	d := make([]byte, ks)
	defer clear(d)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, dst[i*ks:(i+1)*ks])
		diffuse(d, newHash)
	}
	last := dst[(stripes-1)*ks : stripes*ks]
	copy(last, d)
	xorInto(last, key)
	return nil
}

func xorInto(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}
