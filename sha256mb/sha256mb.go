// Package sha256mb hashes many messages of one length at once with
// SHA-256: LUKS2 reencryption's checksum resilience hashes every sector of
// a hotzone, a few hundred thousand 4 KiB messages per GiB. One
// crypto/sha256 hash at a time leaves most of a core idle: its rounds are
// one long chain. On amd64 sixteen messages run in the lanes of AVX-512
// vectors (blocks16), or two side by side on the SHA extensions (blocks2);
// elsewhere, and for what is left over, it is crypto/sha256.
package sha256mb

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Size is the size of a digest.
const Size = sha256.Size

// initial is SHA-256's initial state, words a to h.
var initial = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

// impl is a way to hash: the kernels the machine runs, fastest first.
type impl int

const (
	generic impl = iota // crypto/sha256, one message at a time
	x2                  // blocks2: two messages on the SHA extensions
	x16                 // blocks16: sixteen messages in AVX-512 lanes
)

var implNames = [...]string{generic: "generic", x2: "sha-x2", x16: "avx512-x16"}

func (im impl) String() string { return implNames[im] }

// best is the fastest implementation this machine runs.
var best = available()[len(available())-1]

// SumBlocks writes the SHA-256 digest of each size-byte block of data (its
// length a multiple of size) into sums, Size bytes each in order.
func SumBlocks(sums, data []byte, size int) {
	sumBlocks(best, sums, data, size)
}

func sumBlocks(im impl, sums, data []byte, size int) {
	if size <= 0 || len(data)%size != 0 || len(sums) < len(data)/size*Size {
		panic(fmt.Sprintf("sha256mb: %d bytes of data in blocks of %d, %d bytes of sums", len(data), size, len(sums)))
	}
	n := len(data) / size
	done := 0
	// blocks16 takes whole blocks only: every lane then ends with the
	// same padding block.
	if im >= x16 && size%64 == 0 && n >= 16 {
		pad := padding(size)
		for ; done+16 <= n; done += 16 {
			sum16(sums[done*Size:], data[done*size:], size, pad)
		}
	}
	if im >= x2 {
		for ; done+2 <= n; done += 2 {
			a, b := sum2(data[done*size:(done+1)*size], data[(done+1)*size:(done+2)*size])
			copy(sums[done*Size:], a[:])
			copy(sums[(done+1)*Size:], b[:])
		}
	}
	for ; done < n; done++ {
		d := sha256.Sum256(data[done*size : (done+1)*size])
		copy(sums[done*Size:], d[:])
	}
}

// sum16 hashes the sixteen size-byte blocks at the start of data (size a
// multiple of 64, pad its padding) into the sixteen digests at the start
// of sums.
func sum16(sums, data []byte, size int, pad []byte) {
	var h [8][16]uint32
	for i := range h {
		for j := range h[i] {
			h[i][j] = initial[i]
		}
	}
	blocks16(&h, &data[0], size, size/64)
	blocks16(&h, &pad[0], 0, len(pad)/64)
	for j := range 16 {
		for i := range 8 {
			binary.BigEndian.PutUint32(sums[j*Size+4*i:], h[i][j])
		}
	}
}

// padding returns what SHA-256 appends to a message of n bytes, n a
// multiple of 64: one block of 0x80, zeros and the length in bits.
func padding(n int) []byte {
	p := make([]byte, 64)
	p[0] = 0x80
	binary.BigEndian.PutUint64(p[56:], uint64(n)<<3)
	return p
}

// sum2 returns the digests of a and b, of the same length.
func sum2(a, b []byte) (da, db [Size]byte) {
	var h [16]uint32
	copy(h[:8], initial[:])
	copy(h[8:], initial[:])
	full := len(a) &^ 63
	if full > 0 {
		blocks2(&h, &a[0], &b[0], full/64)
	}
	// The tail, 0x80, zeros and the length in bits fill one or two more
	// blocks, the same number for both.
	var ta, tb [128]byte
	n := len(a) - full
	copy(ta[:], a[full:])
	copy(tb[:], b[full:])
	ta[n], tb[n] = 0x80, 0x80
	end := 64
	if n >= 56 {
		end = 128
	}
	binary.BigEndian.PutUint64(ta[end-8:], uint64(len(a))<<3)
	binary.BigEndian.PutUint64(tb[end-8:], uint64(len(b))<<3)
	blocks2(&h, &ta[0], &tb[0], end/64)
	for i := range 8 {
		binary.BigEndian.PutUint32(da[4*i:], h[i])
		binary.BigEndian.PutUint32(db[4*i:], h[8+i])
	}
	return da, db
}
