//go:build !purego

package xts

import "golang.org/x/sys/cpu"

func impls() []impl {
	if cpu.ARM64.HasAES {
		return []impl{implGeneric, implARM64}
	}
	return []impl{implGeneric}
}

// The kernels take the round keys, the number of rounds (10, 12 or 14), n
// blocks at dst and src, and the encrypted tweak of the first block, which
// they replace with the tweak of the block after the last.

//go:noescape
func encryptARM64(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

//go:noescape
func decryptARM64(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

// archEncryptTweaks encrypts independent blocks with the tweak key: XTS
// with a zero tweak, which stays zero, is ECB.
func archEncryptTweaks(c *Cipher, dst, src []byte) {
	var zero [blockSize]byte
	encryptARM64(&c.tweak[0], c.rounds, &dst[0], &src[0], len(src)/blockSize, &zero)
}

func archEncrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) {
	encryptARM64(&c.enc[0], c.rounds, &dst[0], &src[0], len(src)/blockSize, t)
}

func archDecrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) {
	decryptARM64(&c.dec[0], c.rounds, &dst[0], &src[0], len(src)/blockSize, t)
}

func archSectors(c *Cipher, buf []byte, sectorSize int, tweaks []byte, decrypt bool) {
	archSectorsEach(c, buf, sectorSize, tweaks, decrypt)
}
