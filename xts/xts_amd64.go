//go:build !purego

package xts

import "golang.org/x/sys/cpu"

// impls lists the implementations this machine runs, slowest first.
func impls() []impl {
	l := []impl{implGeneric}
	if cpu.X86.HasAES && cpu.X86.HasSSE41 {
		l = append(l, implAESNI)
		// x/sys/cpu reports VAES and VPCLMULQDQ only with AVX-512, but
		// their 256-bit forms need just AVX2 (CPUID leaf 7, ECX bits 9, 10).
		if ecx := cpuid7ecx(); cpu.X86.HasAVX2 && ecx&(1<<9) != 0 && ecx&(1<<10) != 0 {
			l = append(l, implVAES256)
		}
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW &&
			cpu.X86.HasAVX512VAES && cpu.X86.HasAVX512VPCLMULQDQ {
			l = append(l, implVAES)
		}
	}
	return l
}

// cpuid7ecx returns ECX of CPUID leaf 7, subleaf 0.
func cpuid7ecx() uint32

// The kernels take the round keys, the number of rounds (10, 12 or 14), n
// blocks at dst and src, and the encrypted tweak of the first block, which
// they replace with the tweak of the block after the last.

//go:noescape
func encryptAESNI(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

//go:noescape
func decryptAESNI(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

//go:noescape
func encryptVAES256(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

//go:noescape
func decryptVAES256(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

// encryptVAES and decryptVAES take a multiple of four blocks.
//
//go:noescape
func encryptVAES(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

//go:noescape
func decryptVAES(rk *byte, rounds int, dst, src *byte, n int, tweak *[16]byte)

// The sector kernels run over sectors consecutive data units of blocks
// blocks each, in place, with their encrypted tweaks one after the other
// (overwritten). For VAES, blocks is a multiple of four.

//go:noescape
func encryptSectorsAESNI(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

//go:noescape
func decryptSectorsAESNI(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

//go:noescape
func encryptSectorsVAES256(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

//go:noescape
func decryptSectorsVAES256(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

//go:noescape
func encryptSectorsVAES(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

//go:noescape
func decryptSectorsVAES(rk *byte, rounds int, buf *byte, blocks, sectors int, tweaks *byte)

// The 512-byte sector kernels read one tweak past the last (its value does
// not matter), so tweaks must have room for sectors+1.

//go:noescape
func encryptSectors512VAES(rk *byte, rounds int, buf *byte, sectors int, tweaks *byte)

//go:noescape
func decryptSectors512VAES(rk *byte, rounds int, buf *byte, sectors int, tweaks *byte)

// archSectors runs XTS in place over len(tweaks)/16 sectors of buf with
// their encrypted tweaks.
func archSectors(c *Cipher, buf []byte, sectorSize int, tweaks []byte, decrypt bool) {
	blocks, n := sectorSize/blockSize, len(tweaks)/blockSize
	switch {
	case c.impl == implVAES && blocks == 32 && cap(tweaks) > len(tweaks) && decrypt:
		decryptSectors512VAES(&c.dec[0], c.rounds, &buf[0], n, &tweaks[0])
	case c.impl == implVAES && blocks == 32 && cap(tweaks) > len(tweaks):
		encryptSectors512VAES(&c.enc[0], c.rounds, &buf[0], n, &tweaks[0])
	case c.impl == implVAES && blocks%4 == 0 && decrypt:
		decryptSectorsVAES(&c.dec[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	case c.impl == implVAES && blocks%4 == 0:
		encryptSectorsVAES(&c.enc[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	case c.impl == implVAES256 && decrypt:
		decryptSectorsVAES256(&c.dec[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	case c.impl == implVAES256:
		encryptSectorsVAES256(&c.enc[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	case c.impl == implAESNI && decrypt:
		decryptSectorsAESNI(&c.dec[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	case c.impl == implAESNI:
		encryptSectorsAESNI(&c.enc[0], c.rounds, &buf[0], blocks, n, &tweaks[0])
	default:
		archSectorsEach(c, buf, sectorSize, tweaks, decrypt)
	}
}

// ecbEncryptAESNI encrypts n > 0 independent blocks.
//
//go:noescape
func ecbEncryptAESNI(rk *byte, rounds int, dst, src *byte, n int)

// archEncryptTweaks encrypts tweaks with the tweak key.
func archEncryptTweaks(c *Cipher, dst, src []byte) {
	ecbEncryptAESNI(&c.tweak[0], c.rounds, &dst[0], &src[0], len(src)/blockSize)
}

func archEncrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) {
	n := len(src) / blockSize
	if c.impl == implVAES256 {
		encryptVAES256(&c.enc[0], c.rounds, &dst[0], &src[0], n, t)
		return
	}
	if c.impl == implVAES && n >= 4 {
		v := n &^ 3
		encryptVAES(&c.enc[0], c.rounds, &dst[0], &src[0], v, t)
		if n == v {
			return
		}
		dst, src, n = dst[v*blockSize:], src[v*blockSize:], n-v
	}
	encryptAESNI(&c.enc[0], c.rounds, &dst[0], &src[0], n, t)
}

func archDecrypt(c *Cipher, dst, src []byte, t *[blockSize]byte) {
	n := len(src) / blockSize
	if c.impl == implVAES256 {
		decryptVAES256(&c.dec[0], c.rounds, &dst[0], &src[0], n, t)
		return
	}
	if c.impl == implVAES && n >= 4 {
		v := n &^ 3
		decryptVAES(&c.dec[0], c.rounds, &dst[0], &src[0], v, t)
		if n == v {
			return
		}
		dst, src, n = dst[v*blockSize:], src[v*blockSize:], n-v
	}
	decryptAESNI(&c.dec[0], c.rounds, &dst[0], &src[0], n, t)
}
