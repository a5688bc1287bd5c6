package dmcrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/serpent"
	//lint:ignore SA1019 the reference for twofish specs, as in blockcipher.go.
	"golang.org/x/crypto/twofish"

	"golang.org/x/crypto/xts"
)

func TestIVGenerators(t *testing.T) {
	const sector = 0x0123456789abcdef
	cases := map[string]string{
		"plain":     "efcdab89000000000000000000000000",
		"plain64":   "efcdab8967452301" + "0000000000000000",
		"plain64be": "0000000000000000" + "0123456789abcdef",
	}
	for name, want := range cases {
		g, err := ivGens[name](Spec{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var iv [16]byte
		g.generate(iv[:], sector)
		if got := hex.EncodeToString(iv[:]); got != want {
			t.Errorf("%s IV = %s, want %s", name, got, want)
		}
	}
}

// refBlocks are the block ciphers the reference modes below run over,
// taken from their packages directly.
var refBlocks = map[string]func([]byte) (cipher.Block, error){
	"aes":     aes.NewCipher,
	"serpent": func(k []byte) (cipher.Block, error) { return serpent.NewCipher(k) },
	"twofish": func(k []byte) (cipher.Block, error) { return twofish.NewCipher(k) },
}

// TestCBCESSIVIndependent checks CIPHER-cbc-essiv:sha256 against
// crypto/cipher's CBC with the ESSIV IV derived from its definition (the
// same block cipher keyed with SHA-256 of the key), for each sector size:
// IVs count 512-byte units even in 4096-byte sectors.
func TestCBCESSIVIndependent(t *testing.T) {
	for name, newBlock := range refBlocks {
		t.Run(name, func(t *testing.T) { testCBCESSIV(t, name, newBlock) })
	}
}

func testCBCESSIV(t *testing.T, name string, newBlock func([]byte) (cipher.Block, error)) {
	for _, keyLen := range []int{16, 32} {
		for _, ss := range []int{512, 1024, 4096} {
			key := make([]byte, keyLen)
			rand.Read(key)
			c, err := New(name+"-cbc-essiv:sha256", key)
			if err != nil {
				t.Fatal(err)
			}
			plain := make([]byte, 4*ss)
			rand.Read(plain)
			buf := bytes.Clone(plain)
			const first = 1000
			c.Encrypt(buf, first, ss)

			salt := sha256.Sum256(key)
			essiv, _ := newBlock(salt[:])
			data, _ := newBlock(key)
			for i := 0; i < 4; i++ {
				var iv [16]byte
				binary.LittleEndian.PutUint64(iv[:], first+uint64(i*ss/512))
				essiv.Encrypt(iv[:], iv[:])
				want := make([]byte, ss)
				cipher.NewCBCEncrypter(data, iv[:]).CryptBlocks(want, plain[i*ss:(i+1)*ss])
				if !bytes.Equal(buf[i*ss:(i+1)*ss], want) {
					t.Fatalf("key %d sector size %d: sector %d differs from crypto/cipher CBC-ESSIV", keyLen, ss, i)
				}
			}
			c.Decrypt(buf, first, ss)
			if !bytes.Equal(buf, plain) {
				t.Fatalf("key %d sector size %d: decrypt does not invert encrypt", keyLen, ss)
			}
		}
	}
}

// TestXTSPlain64Independent checks CIPHER-xts-plain64 and CIPHER-xts-plain
// against golang.org/x/crypto/xts, whose sector number is the LE64 tweak.
func TestXTSPlain64Independent(t *testing.T) {
	for name, newBlock := range refBlocks {
		t.Run(name, func(t *testing.T) { testXTSPlain64(t, name, newBlock) })
	}
}

func testXTSPlain64(t *testing.T, name string, newBlock func([]byte) (cipher.Block, error)) {
	for _, spec := range []string{name + "-xts-plain64", name + "-xts-plain"} {
		for _, keyLen := range []int{32, 64} {
			for _, ss := range []int{512, 4096} {
				key := make([]byte, keyLen)
				rand.Read(key)
				c, err := New(spec, key)
				if err != nil {
					t.Fatal(err)
				}
				ref, _ := xts.NewCipher(newBlock, key)
				plain := make([]byte, 3*ss)
				rand.Read(plain)
				buf := bytes.Clone(plain)
				first := uint64(1<<32 - 8) // plain wraps at 2^32, plain64 does not
				c.Encrypt(buf, first, ss)
				for i := 0; i < 3; i++ {
					tweak := first + uint64(i*ss/512)
					if spec == name+"-xts-plain" {
						tweak &= 0xffffffff
					}
					want := make([]byte, ss)
					ref.Encrypt(want, plain[i*ss:(i+1)*ss], tweak)
					if !bytes.Equal(buf[i*ss:(i+1)*ss], want) {
						t.Fatalf("%s key %d sector size %d: sector %d differs from x/crypto/xts", spec, keyLen, ss, i)
					}
				}
				c.Decrypt(buf, first, ss)
				if !bytes.Equal(buf, plain) {
					t.Fatalf("%s: decrypt does not invert encrypt", spec)
				}
			}
		}
	}
}

func TestSectorCipherNoAllocs(t *testing.T) {
	if testtool.Race {
		t.Skip("allocation counts are meaningless under -race; make unit runs this test without it")
	}
	for _, spec := range []string{"aes-xts-plain64", "aes-cbc-essiv:sha256",
		"serpent-xts-plain64", "serpent-cbc-essiv:sha256", "twofish-xts-plain64", "twofish-xts-essiv:sha256"} {
		c, err := New(spec, make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8192)
		if n := testing.AllocsPerRun(50, func() { c.Encrypt(buf, 7, 4096); c.Decrypt(buf, 7, 512) }); n != 0 {
			t.Errorf("%s: %v allocations per call", spec, n)
		}
	}
}
