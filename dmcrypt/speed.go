package dmcrypt

import (
	"crypto/rand"
	"time"
)

// Speed measures the sector cipher spec with a random key of keyBytes on
// this core the way cryptsetup's benchmark does: a buffer of bufSize bytes
// en- and decrypted in place in sectors of sectorSize, repeated for about d
// each way. It returns MiB/s.
func Speed(spec string, keyBytes, sectorSize, bufSize int, d time.Duration) (enc, dec float64, err error) {
	key := make([]byte, keyBytes)
	rand.Read(key)
	c, err := New(spec, key)
	clear(key)
	if err != nil {
		return 0, 0, err
	}
	defer c.Wipe()
	buf := make([]byte, bufSize)
	rand.Read(buf)
	measure := func(f func([]byte, uint64, int)) float64 {
		var n int64
		start := time.Now()
		for time.Since(start) < d {
			f(buf, 0, sectorSize)
			n += int64(len(buf))
		}
		return float64(n) / (1 << 20) / time.Since(start).Seconds()
	}
	enc = measure(c.Encrypt)
	dec = measure(c.Decrypt)
	return enc, dec, nil
}
