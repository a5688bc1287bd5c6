package xts

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"unsafe"
)

// generic is the portable path: crypto/aes for the block cipher (which has
// its own assembly on several architectures) and XTS around it with the
// tweaks computed a batch at a time in 64-bit words.
type generic struct {
	data, tweak cipher.Block
}

func newGeneric(dataKey, tweakKey []byte) (*generic, error) {
	d, err := aes.NewCipher(dataKey)
	if err != nil {
		return nil, err
	}
	t, err := aes.NewCipher(tweakKey)
	if err != nil {
		return nil, err
	}
	return &generic{data: d, tweak: t}, nil
}

// genericBatch is how many blocks share one pass of tweak computation.
const genericBatch = 16

// crypt runs XTS over one data unit with the plaintext tweak. Only slices of
// dst are handed to crypto/aes (an interface call would move a stack buffer
// to the heap), so the tweak is encrypted in dst's first block, after that
// block of src has been saved.
func (g *generic) crypt(dst, src []byte, tweak *[blockSize]byte, decrypt bool) {
	dst = dst[:len(src)]
	s0 := binary.LittleEndian.Uint64(src[:8])
	s1 := binary.LittleEndian.Uint64(src[8:16])
	copy(dst[:blockSize], tweak[:])
	g.tweak.Encrypt(dst[:blockSize], dst[:blockSize])
	lo := binary.LittleEndian.Uint64(dst[:8])
	hi := binary.LittleEndian.Uint64(dst[8:16])
	binary.LittleEndian.PutUint64(dst[:8], s0)
	binary.LittleEndian.PutUint64(dst[8:16], s1)
	lo, hi = g.blocks(dst[:blockSize], dst[:blockSize], lo, hi, decrypt)
	g.blocks(dst[blockSize:], src[blockSize:], lo, hi, decrypt)
}

// blocks runs XTS over whole blocks starting with the encrypted tweak hi:lo
// and returns the tweak of the block after the last.
func (g *generic) blocks(dst, src []byte, lo, hi uint64, decrypt bool) (uint64, uint64) {
	var tw [genericBatch * blockSize]byte
	for len(src) > 0 {
		n := min(len(src), len(tw))
		for i := 0; i < n; i += blockSize {
			binary.LittleEndian.PutUint64(tw[i:], lo)
			binary.LittleEndian.PutUint64(tw[i+8:], hi)
			lo, hi = mulX(lo, hi)
		}
		xorWords(dst[:n], src[:n], tw[:n])
		for i := 0; i < n; i += blockSize {
			b := dst[i : i+blockSize]
			if decrypt {
				g.data.Decrypt(b, b)
			} else {
				g.data.Encrypt(b, b)
			}
		}
		xorWords(dst[:n], dst[:n], tw[:n])
		dst, src = dst[n:], src[n:]
	}
	clear(tw[:])
	return lo, hi
}

// mulX multiplies the tweak hi:lo by x in GF(2^128) modulo
// x^128+x^7+x^2+x+1, in constant time.
func mulX(lo, hi uint64) (uint64, uint64) {
	carry := uint64(int64(hi)>>63) & 0x87
	return lo<<1 ^ carry, hi<<1 | lo>>63
}

// xorWords sets dst = a ^ b for lengths that are multiples of 16.
func xorWords(dst, a, b []byte) {
	for i := 0; i < len(a); i += 16 {
		x0 := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:])
		x1 := binary.LittleEndian.Uint64(a[i+8:]) ^ binary.LittleEndian.Uint64(b[i+8:])
		binary.LittleEndian.PutUint64(dst[i:], x0)
		binary.LittleEndian.PutUint64(dst[i+8:], x1)
	}
}

// overlaps reports whether x and y share memory.
func overlaps(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs < ys+uintptr(len(y)) && ys < xs+uintptr(len(x))
}
