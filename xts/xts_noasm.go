//go:build (!amd64 && !arm64) || purego

package xts

// impls lists the implementations this machine runs, slowest first.
func impls() []impl { return []impl{implGeneric} }

func archEncryptTweaks(c *Cipher, dst, src []byte)               { panic("xts: no assembly") }
func archEncrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) { panic("xts: no assembly") }
func archDecrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) { panic("xts: no assembly") }
func archSectors(c *Cipher, buf []byte, sectorSize int, tweaks []byte, decrypt bool) {
	panic("xts: no assembly")
}
