package xts

import (
	"crypto/aes"
	"fmt"
	"testing"

	xxts "golang.org/x/crypto/xts"
)

// BenchmarkXTS encrypts one sector per operation in place through
// EncryptSectors, the way `openssl speed -evp aes-256-xts -bytes N` encrypts
// one N-byte data unit per call.
func BenchmarkXTS(b *testing.B) {
	for _, im := range impls() {
		for _, ks := range []int{32, 64} {
			for _, size := range []int{512, 4096} {
				b.Run(fmt.Sprintf("%s/%d/%d", im, ks*8, size), func(b *testing.B) {
					c, _ := newCipher(make([]byte, ks), im)
					buf := make([]byte, size)
					b.SetBytes(int64(size))
					var sector uint64
					for b.Loop() {
						c.EncryptSectors(buf, size, sector, 1)
						sector++
					}
				})
			}
		}
	}
}

// BenchmarkXCrypto is golang.org/x/crypto/xts on the same work, for
// reference.
func BenchmarkXCrypto(b *testing.B) {
	for _, ks := range []int{32, 64} {
		for _, size := range []int{512, 4096} {
			b.Run(fmt.Sprintf("%d/%d", ks*8, size), func(b *testing.B) {
				c, _ := xxts.NewCipher(aes.NewCipher, make([]byte, ks))
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				var sector uint64
				for b.Loop() {
					c.Encrypt(buf, buf, sector)
					sector++
				}
			})
		}
	}
}

// BenchmarkXTSBatch encrypts a 64 KiB request of sectors per operation, the
// way the dm-crypt layer calls EncryptSectors: tweaks are then encrypted
// several sectors at a time.
func BenchmarkXTSBatch(b *testing.B) {
	for _, im := range impls() {
		for _, size := range []int{512, 4096} {
			b.Run(fmt.Sprintf("%s/512/%d", im, size), func(b *testing.B) {
				c, _ := newCipher(make([]byte, 64), im)
				buf := make([]byte, 64<<10)
				b.SetBytes(int64(len(buf)))
				var sector uint64
				for b.Loop() {
					c.EncryptSectors(buf, size, sector, uint64(size/512))
					sector += uint64(len(buf) / 512)
				}
			})
		}
	}
}
