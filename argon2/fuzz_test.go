package argon2

import (
	"bytes"
	"testing"
)

// FuzzArgon2 compares derivations on every impl with x/crypto/argon2. The
// fuzzer picks the password, the salt and small costs: 1 to 4 passes, 1 to
// 8 lanes, up to 512 KiB of memory from the minimum, any rounding, tags of
// 1 to 256 bytes.
func FuzzArgon2(f *testing.F) {
	f.Add([]byte("password"), []byte("somesalt"), uint8(2), uint16(64), uint8(1), uint8(32), true)
	f.Add([]byte{}, []byte("saltsalt"), uint8(1), uint16(37), uint8(4), uint8(65), false)
	f.Add(bytes.Repeat([]byte{0xff}, 100), []byte("0123456789abcdef"), uint8(3), uint16(99), uint8(7), uint8(255), true)
	f.Fuzz(func(t *testing.T, password, salt []byte, time uint8, memoryKiB uint16, threads uint8, keyLen uint8, id bool) {
		p := params{
			mode:      Argon2i,
			time:      uint32(time%4) + 1,
			threads:   uint32(threads%8) + 1,
			keyLen:    uint32(keyLen) + 1,
			memoryKiB: uint32(memoryKiB % 512),
		}
		p.memoryKiB += 8 * p.threads
		if id {
			p.mode = Argon2id
		}
		want := reference(p.mode, password, salt, p.time, p.memoryKiB, uint8(p.threads), p.keyLen)
		for _, im := range impls() {
			got, err := deriveWith(im, p, password, salt, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v, %+v: differs from x/crypto/argon2", im, p)
			}
		}
	})
}
