package dmcrypt

import (
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
)

// ivScratch is per-call scratch space for IVs. A slice handed to an
// interface method escapes to the heap, so sector ciphers take one of these
// from scratchPool per call instead of allocating per sector.
type ivScratch struct {
	iv [32]byte
}

var scratchPool = sync.Pool{New: func() any { return new(ivScratch) }}

// ivGenerator fills iv (16 or 32 bytes, zeroed by the caller's fresh array)
// for the 512-byte-unit sector number.
type ivGenerator interface {
	generate(iv []byte, sector uint64)
}

var ivGens = map[string]func(sp Spec, key []byte) (ivGenerator, error){
	"plain":     func(Spec, []byte) (ivGenerator, error) { return plainIV{}, nil },
	"plain64":   func(Spec, []byte) (ivGenerator, error) { return plain64IV{}, nil },
	"plain64be": func(Spec, []byte) (ivGenerator, error) { return plain64beIV{}, nil },
	"essiv":     newESSIV,
}

// plainIV is the low 32 bits of the sector, little-endian.
type plainIV struct{}

func (plainIV) generate(iv []byte, sector uint64) {
	binary.LittleEndian.PutUint32(iv, uint32(sector))
}

// plain64IV is the 64-bit sector, little-endian.
type plain64IV struct{}

func (plain64IV) generate(iv []byte, sector uint64) {
	binary.LittleEndian.PutUint64(iv, sector)
}

// plain64beIV is the 64-bit sector, big-endian, in the IV's last 8 bytes.
type plain64beIV struct{}

func (plain64beIV) generate(iv []byte, sector uint64) {
	binary.BigEndian.PutUint64(iv[len(iv)-8:], sector)
}

// essivIV encrypts the plain64 IV with a cipher keyed by a hash of the
// volume key: "encrypted salt-sector IV". The cipher is the spec's block
// cipher (the kernel's essiv template takes it from the inner mode), keyed
// with the whole SHA-256 digest: AES-256, Serpent-256, Twofish-256.
type essivIV struct{ b cipher.Block }

func newESSIV(sp Spec, key []byte) (ivGenerator, error) {
	if sp.IVOpt != "sha256" {
		return nil, fmt.Errorf("unsupported ESSIV hash %q (only sha256)", sp.IVOpt)
	}
	bc, ok := blockCiphers[sp.Cipher]
	if !ok {
		return nil, fmt.Errorf("ESSIV with cipher %q is not supported", sp.Cipher)
	}
	salt := sha256.Sum256(key)
	b, err := bc.new(salt[:])
	clear(salt[:])
	if err != nil {
		return nil, err
	}
	return essivIV{b}, nil
}

func (e essivIV) generate(iv []byte, sector uint64) {
	binary.LittleEndian.PutUint64(iv, sector)
	e.b.Encrypt(iv[:16], iv[:16])
}
