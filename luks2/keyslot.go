package luks2

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/luksd/luksd/dmcrypt"
)

// Keyslot areas are encrypted in 512-byte sectors with IVs counted from the
// area start, whatever the data segment's sector size.
const areaSectorSize = 512

// openKeyslot derives the area key from passphrase, decrypts the keyslot
// area and merges the stripes into the candidate volume key.
func openKeyslot(dev io.ReaderAt, k *keyslot, passphrase []byte) ([]byte, error) {
	if k.typ != "luks2" {
		return nil, fmt.Errorf("%w: keyslot %d has type %q", ErrUnsupported, k.id, k.typ)
	}
	h, err := hashFunc(k.afHash)
	if err != nil {
		return nil, err
	}
	n := afSize(k.keySize, k.stripes)
	if uint64(n) > k.areaSize || n > maxKeyslotsSize {
		return nil, fmt.Errorf("keyslot %d area is too small for its stripes", k.id)
	}
	key, err := deriveKey(k.kdf, passphrase, k.areaKeySize)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	c, err := dmcrypt.New(k.areaCipher, key)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.id, err)
	}
	defer c.Wipe()
	buf := make([]byte, n)
	defer clear(buf)
	if _, err := dev.ReadAt(buf, int64(k.areaOffset)); err != nil {
		return nil, fmt.Errorf("reading keyslot %d area: %w", k.id, err)
	}
	c.Decrypt(buf, 0, areaSectorSize)
	return afMerge(buf, k.keySize, k.stripes, h)
}

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

// wipeArea overwrites a keyslot area with random bytes.
func wipeArea(dev io.WriterAt, off, size uint64) error {
	buf := make([]byte, 64<<10)
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		if _, err := rand.Read(buf[:n]); err != nil {
			return err
		}
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
