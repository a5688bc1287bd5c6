package luks2

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"

	"github.com/luksd/luksd/dmcrypt"
)

var (
	// ErrKeyslotOpen: a keyslot's parameters cannot work (cryptsetup's
	// "Keyslot open failed."); a search of the keyslots stops at it, as
	// cryptsetup's does. CLI exit 1.
	ErrKeyslotOpen = errors.New("keyslot open failed")
	// errKeyslotUnusable: a keyslot cryptsetup's search skips (-ENOENT):
	// of a type it has no handler for, or bound to another digest.
	errKeyslotUnusable = errors.New("keyslot unusable")
)

// Keyslot areas are encrypted in 512-byte sectors with IVs counted from the
// area start, whatever the data segment's sector size.
const areaSectorSize = 512

// openKeyslot derives the area key from passphrase, decrypts the keyslot
// area and merges the stripes into the candidate key, as cryptsetup's
// luks2_keyslot_get_key does: the area holds key_size bytes split into
// 4000 stripes whatever "stripes" says, and a keyslot whose parameters
// cannot work fails with ErrKeyslotOpen (ErrUnsupported where luksd
// refuses what cryptsetup would run: an unsafe area cipher, a KDF it does
// not implement).
func openKeyslot(dev io.ReaderAt, k *keyslot, passphrase []byte) ([]byte, error) {
	if k.typ != "luks2" {
		return nil, errKeyslotUnusable
	}
	if err := k.usableParams(); err != nil {
		return nil, err
	}
	h, err := hashFunc(k.afHash)
	if err != nil {
		return nil, fmt.Errorf("%w: keyslot %d: AF %v", ErrKeyslotOpen, k.id, err)
	}
	if err := safeCipher(k.areaCipher); err != nil {
		return nil, fmt.Errorf("%w: keyslot %d: %v", ErrUnsupported, k.id, err)
	}
	key, err := deriveKey(k.kdf, passphrase, k.areaKeySize)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.id, err)
	}
	defer clear(key)
	c, err := dmcrypt.New(k.areaCipher, key)
	if err != nil {
		return nil, fmt.Errorf("%w: keyslot %d: %v", ErrKeyslotOpen, k.id, err)
	}
	defer c.Wipe()
	buf := make([]byte, afSize(k.keySize, defaultStripes))
	defer clear(buf)
	if _, err := dev.ReadAt(buf, int64(k.areaOffset)); err != nil {
		return nil, fmt.Errorf("%w: reading keyslot %d area: %v", ErrKeyslotOpen, k.id, err)
	}
	c.Decrypt(buf, 0, areaSectorSize)
	return afMerge(buf, k.keySize, defaultStripes, h)
}

// usableParams makes cryptsetup's checks of a keyslot's KDF parameters
// before it derives anything (luks2_keyslot_get_pbkdf_params): the fields
// of its type, a 32-byte salt, a key size luksd can hold.
func (k *keyslot) usableParams() error {
	kdf := k.obj.get("kdf")
	need := []string{"type", "time", "memory", "cpus", "salt"}
	if k.kdf.typ == "pbkdf2" {
		need = []string{"type", "hash", "iterations", "salt"}
	}
	for _, f := range need {
		if kdf.get(f) == nil {
			return fmt.Errorf("%w: keyslot %d kdf has no %s", ErrKeyslotOpen, k.id, f)
		}
	}
	if k.kdf.saltErr != nil || len(k.kdf.salt) != keyslotSaltSize {
		return fmt.Errorf("%w: keyslot %d salt is not %d bytes of base64", ErrKeyslotOpen, k.id, keyslotSaltSize)
	}
	if k.keySize <= 0 || k.keySize > maxKeySize || k.areaKeySize <= 0 || k.areaKeySize > maxKeySize {
		return fmt.Errorf("%w: keyslot %d key size %d (area key %d)", ErrKeyslotOpen, k.id, k.keySize, k.areaKeySize)
	}
	return nil
}

// maxKeySize bounds the keys luksd derives and merges: cryptsetup's
// volume keys are at most 512 bits, and an odd keyslot's key_size (it
// accepts up to 2^32-1) costs 4000 times its size in memory and reads.
const maxKeySize = 64 << 10

// keyslotParams describe a keyslot to create.
type keyslotParams struct {
	id          int
	areaOffset  uint64
	areaSize    uint64
	areaCipher  string
	areaKeySize int
	afHash      string
	stripes     int
	kdf         kdfParams
}

// node returns the keyslot's JSON object for a keySize-byte key, in
// cryptsetup's field order.
func (p keyslotParams) node(keySize int) *node {
	kdf := obj("type", jString(p.kdf.typ))
	if p.kdf.typ == "pbkdf2" {
		kdf.set("hash", jString(p.kdf.hash))
		kdf.set("iterations", jInt(int64(p.kdf.iterations)))
	} else {
		kdf.set("time", jInt(int64(p.kdf.time)))
		kdf.set("memory", jInt(int64(p.kdf.memory)))
		kdf.set("cpus", jInt(int64(p.kdf.cpus)))
	}
	kdf.set("salt", jString(base64.StdEncoding.EncodeToString(p.kdf.salt)))
	return obj(
		"type", jString("luks2"),
		"key_size", jInt(int64(keySize)),
		"af", obj("type", jString("luks1"), "stripes", jInt(int64(p.stripes)), "hash", jString(p.afHash)),
		"area", obj("type", jString("raw"),
			"offset", jUint64Str(p.areaOffset),
			"size", jUint64Str(p.areaSize),
			"encryption", jString(p.areaCipher),
			"key_size", jInt(int64(p.areaKeySize))),
		"kdf", kdf,
	)
}

// writeMaterial encrypts vk under passphrase into the keyslot's area. The
// caller has validated the metadata that will name it.
func (p keyslotParams) writeMaterial(dev io.WriterAt, vk, passphrase []byte) error {
	h, err := hashFunc(p.afHash)
	if err != nil {
		return err
	}
	n := afSize(len(vk), p.stripes)
	if uint64(n) > p.areaSize {
		return fmt.Errorf("keyslot area of %d bytes is too small", p.areaSize)
	}
	key, err := deriveKey(p.kdf, passphrase, p.areaKeySize)
	if err != nil {
		return err
	}
	defer clear(key)
	c, err := dmcrypt.New(p.areaCipher, key)
	if err != nil {
		return err
	}
	defer c.Wipe()
	buf := make([]byte, n)
	defer clear(buf)
	if err := afSplit(buf, vk, p.stripes, h); err != nil {
		return err
	}
	c.Encrypt(buf, 0, areaSectorSize)
	if _, err := dev.WriteAt(buf, int64(p.areaOffset)); err != nil {
		return fmt.Errorf("writing keyslot %d area: %w", p.id, err)
	}
	return nil
}

// wipeArea overwrites a keyslot area with random bytes: a ChaCha8 stream
// (math/rand/v2's cryptographically strong generator) under a key from
// crypto/rand. Drawing every byte from crypto/rand ran at 380 MB/s here,
// 42 ms for the 16 MiB reencrypt keyslot area a reencryption wipes when
// it ends; the stream runs at 1.7 GB/s.
func wipeArea(dev io.WriterAt, off, size uint64) error {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	stream := mrand.NewChaCha8(seed)
	clear(seed[:])
	buf := make([]byte, 64<<10)
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		_, _ = stream.Read(buf[:n]) // never fails
		if _, err := dev.WriteAt(buf[:n], int64(off+done)); err != nil {
			return fmt.Errorf("wiping keyslot area: %w", err)
		}
		done += n
	}
	return nil
}

// wipeDurably wipes an area the metadata no longer names and flushes.
func wipeDurably(dev Device, off, size uint64) error {
	if err := wipeArea(dev, off, size); err != nil {
		return err
	}
	return flush(dev)
}
