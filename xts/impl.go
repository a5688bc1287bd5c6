package xts

import "encoding/binary"

// impl names one implementation of the block work. Each Cipher is bound to
// one when it is made; tests make a Cipher for every impl the machine runs.
type impl int

const (
	implGeneric impl = iota // crypto/aes and Go
	implAESNI               // amd64 AES-NI, eight blocks in flight
	implVAES                // amd64 VAES on 512-bit vectors (AVX-512)
	implVAES256             // amd64 VAES on 256-bit vectors (AVX2)
	implARM64               // ARMv8 AES instructions
)

func (im impl) String() string {
	switch im {
	case implGeneric:
		return "generic"
	case implAESNI:
		return "aesni"
	case implVAES:
		return "vaes"
	case implVAES256:
		return "vaes256"
	case implARM64:
		return "arm64"
	}
	return "unknown"
}

// defaultImpl is the fastest impl this machine runs.
var defaultImpl = impls()[len(impls())-1]

// unit encrypts or decrypts one data unit with the plaintext tweak.
func (c *Cipher) unit(dst, src []byte, tweak *[blockSize]byte, decrypt bool) {
	if c.impl == implGeneric {
		c.gen.crypt(dst, src, tweak, decrypt)
		return
	}
	var t [blockSize]byte
	archEncryptTweaks(c, t[:], tweak[:])
	if decrypt {
		archDecrypt(c, dst[:len(src)], src, &t)
	} else {
		archEncrypt(c, dst[:len(src)], src, &t)
	}
}

// sectorsBatch is how many sector tweaks the assembly paths encrypt in one
// go.
const sectorsBatch = 8

func (c *Cipher) sectors(buf []byte, sectorSize int, sector, step uint64, decrypt bool) {
	if sectorSize <= 0 || sectorSize%blockSize != 0 || len(buf)%sectorSize != 0 {
		panic("xts: buffer is not a whole number of sectors of a whole number of blocks")
	}
	// One spare tweak: the VAES kernel for 512-byte sectors reads ahead.
	var tweaks [(sectorsBatch + 1) * blockSize]byte
	for len(buf) > 0 {
		n := min(len(buf)/sectorSize, sectorsBatch)
		clear(tweaks[:])
		for i := range n {
			binary.LittleEndian.PutUint64(tweaks[i*blockSize:], sector)
			sector += step
		}
		if c.impl == implGeneric {
			for i := range n {
				s := buf[i*sectorSize : (i+1)*sectorSize]
				c.gen.crypt(s, s, (*[blockSize]byte)(tweaks[i*blockSize:]), decrypt)
			}
		} else {
			archEncryptTweaks(c, tweaks[:n*blockSize], tweaks[:n*blockSize])
			archSectors(c, buf[:n*sectorSize], sectorSize, tweaks[:n*blockSize], decrypt)
		}
		buf = buf[n*sectorSize:]
	}
	clear(tweaks[:])
}

// archSectorsEach is archSectors one data unit at a time.
func archSectorsEach(c *Cipher, buf []byte, sectorSize int, tweaks []byte, decrypt bool) {
	for i := 0; i < len(tweaks)/blockSize; i++ {
		s := buf[i*sectorSize : (i+1)*sectorSize]
		t := (*[blockSize]byte)(tweaks[i*blockSize:])
		if decrypt {
			archDecrypt(c, s, s, t)
		} else {
			archEncrypt(c, s, s, t)
		}
	}
}
