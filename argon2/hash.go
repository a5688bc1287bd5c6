package argon2

import (
	"encoding/binary"

	"golang.org/x/crypto/blake2b"
)

const version = 0x13

// initialHash is H0 (RFC 9106, 3.2): BLAKE2b-512 over the parameters and
// the inputs, each input preceded by its length. It has 8 spare bytes for
// the block and lane numbers that H' hashes with it to make the first
// blocks.
func initialHash(p params, password, salt, secret, data []byte) [blake2b.Size + 8]byte {
	h, _ := blake2b.New512(nil)
	var w [4]byte
	word := func(v uint32) {
		binary.LittleEndian.PutUint32(w[:], v)
		h.Write(w[:])
	}
	for _, v := range []uint32{p.threads, p.keyLen, p.memoryKiB, p.time, version, uint32(p.mode)} {
		word(v)
	}
	for _, in := range [][]byte{password, salt, secret, data} {
		word(uint32(len(in)))
		h.Write(in)
	}
	var h0 [blake2b.Size + 8]byte
	h.Sum(h0[:0])
	return h0
}

// longHash writes H'^len(out)(in), the variable-length hash of RFC 9106,
// 3.3, to out: BLAKE2b of the length and in when out is at most 64 bytes,
// else a chain of BLAKE2b-512 of which each link gives its first 32 bytes
// and the last one, sized to what is left, all of it.
func longHash(out, in []byte) {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(out)))
	if len(out) <= blake2b.Size {
		h, _ := blake2b.New(len(out), nil)
		h.Write(n[:])
		h.Write(in)
		h.Sum(out[:0])
		return
	}
	h, _ := blake2b.New512(nil)
	h.Write(n[:])
	h.Write(in)
	var v [blake2b.Size]byte
	h.Sum(v[:0])
	for len(out) > blake2b.Size {
		copy(out, v[:32])
		out = out[32:]
		if len(out) > blake2b.Size {
			v = blake2b.Sum512(v[:])
		}
	}
	last, _ := blake2b.New(len(out), nil)
	last.Write(v[:])
	last.Sum(out[:0])
	clear(v[:])
}

// firstBlocks makes each lane's first two blocks from H0 (RFC 9106, 3.2,
// steps 3 and 4): H'^1024(H0 || LE32(column) || LE32(lane)).
func (f *filler) firstBlocks(h0 *[blake2b.Size + 8]byte) {
	var buf [blockSize]byte
	for lane := range f.lanes {
		for col := range uint32(2) {
			binary.LittleEndian.PutUint32(h0[blake2b.Size:], col)
			binary.LittleEndian.PutUint32(h0[blake2b.Size+4:], lane)
			longHash(buf[:], h0[:])
			f.mem[lane*f.laneLen+col].setBytes(&buf)
		}
	}
	clear(buf[:])
}

// finalize returns the tag: H'^keyLen of the XOR of the lanes' last blocks.
func (f *filler) finalize(keyLen uint32) []byte {
	var c block
	for lane := range f.lanes {
		last := &f.mem[lane*f.laneLen+f.laneLen-1]
		for i := range c {
			c[i] ^= last[i]
		}
	}
	var buf [blockSize]byte
	c.bytes(&buf)
	out := make([]byte, keyLen)
	longHash(out, buf[:])
	clear(buf[:])
	clear(c[:])
	return out
}
