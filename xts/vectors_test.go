package xts

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// ieee1619Vectors are XTS-AES test vectors from IEEE P1619/D16 annex B
// (the whole-block ones): key1 || key2, the 16-byte tweak (the data unit
// sequence number, little-endian), plaintext and ciphertext. An empty
// plaintext stands for the 512-byte pattern 00 01 .. ff 00 01 .. ff.
var ieee1619Vectors = []struct {
	name, key, tweak, ptx, ctx string
}{
	{"vector 1", "00000000000000000000000000000000" + "00000000000000000000000000000000",
		"00000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e"},
	{"vector 2", "11111111111111111111111111111111" + "22222222222222222222222222222222",
		"33333333330000000000000000000000",
		"4444444444444444444444444444444444444444444444444444444444444444",
		"c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0"},
	{"vector 3", "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0" + "22222222222222222222222222222222",
		"33333333330000000000000000000000",
		"4444444444444444444444444444444444444444444444444444444444444444",
		"af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89"},
	{"vector 4", "27182818284590452353602874713526" + "31415926535897932384626433832795",
		"00000000000000000000000000000000", "",
		"27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89c" +
			"c78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412" +
			"328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce" +
			"93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad0265" +
			"5ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8" +
			"a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f434" +
			"1332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c" +
			"5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e" +
			"94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc" +
			"1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3" +
			"e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344" +
			"b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd" +
			"74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752" +
			"afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203e" +
			"bb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18d" +
			"eb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568"},
	{"vector 10", "2718281828459045235360287471352662497757247093699959574966967627" +
		"3141592653589793238462643383279502884197169399375105820974944592",
		"ff000000000000000000000000000000", "",
		"1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b" +
			"5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd" +
			"5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0" +
			"c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca" +
			"2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0" +
			"b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f" +
			"93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec" +
			"583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a" +
			"84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1" +
			"505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae" +
			"9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29" +
			"a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac" +
			"6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f" +
			"645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed4385" +
			"1ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa" +
			"773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151"},
	{"vector 15, whole blocks", "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0" + "bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0",
		"9a785634120000000000000000000000",
		"4444444444444444444444444444444444444444444444444444444444444444",
		"b01f86f8edc1863706fa8a4253e34f28af319de38334870f4dd1f94cbe9832f1"},
	{"vector 19, whole blocks", "e0e1e2e3e4e5e6e7e8e9eaebecedeeef" + "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
		"21436587a90000000000000000000000", "",
		"38b45812ef43a05bd957e545907e223b954ab4aaf088303ad910eadf14b42be6" +
			"8b2461149d8c8ba85f992be970bc621f1b06573f63e867bf5875acafa04e42cc" +
			"bd7bd3c2a0fb1fff791ec5ec36c66ae4ac1e806d81fbf709dbe29e471fad3854" +
			"9c8e66f5345d7c1eb94f405d1ec785cc6f6a68f6254dd8339f9d84057e01a177" +
			"41990482999516b5611a38f41bb6478e6f173f320805dd71b1932fc333cb9ee3" +
			"9936beea9ad96fa10fb4112b901734ddad40bc1878995f8e11aee7d141a2f5d4" +
			"8b7a4e1e7f0b2c04830e69a4fd1378411c2f287edf48c6c4e5c247a19680f7fe" +
			"41cefbd49b582106e3616cbbe4dfb2344b2ae9519391f3e0fb4922254b1d6d2d" +
			"19c6d4d537b3a26f3bcc51588b32f3eca0829b6a5ac72578fb814fb43cf80d64" +
			"a233e3f997a3f02683342f2b33d25b492536b93becb2f5e1a8b82f5b88334272" +
			"9e8ae09d16938841a21a97fb543eea3bbff59f13c1a18449e398701c1ad51648" +
			"346cbc04c27bb2da3b93a1372ccae548fb53bee476f9e9c91773b1bb19828394" +
			"d55d3e1a20ed69113a860b6829ffa847224604435070221b257e8dff783615d2" +
			"cae4803a93aa4334ab482a0afac9c0aeda70b45a481df5dec5df8cc0f423c77a" +
			"5fd46cd312021d4b438862419a791be03bb4d97c0e59578542531ba466a83baf" +
			"92cefc151b5cc1611a167893819b63fb8a6b18e86de60290fa72b797b0ce59f3"},
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pattern512() []byte {
	p := make([]byte, 512)
	for i := range p {
		p[i] = byte(i)
	}
	return p
}

func TestIEEE1619Vectors(t *testing.T) {
	t.Logf("paths on this machine: %v (default %v)", impls(), defaultImpl)
	for _, im := range impls() {
		t.Run(im.String(), func(t *testing.T) {
			for _, v := range ieee1619Vectors {
				key := unhex(t, v.key)
				tweak := [16]byte(unhex(t, v.tweak))
				ptx := pattern512()
				if v.ptx != "" {
					ptx = unhex(t, v.ptx)
				}
				ctx := unhex(t, v.ctx)
				c, err := newCipher(key, im)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(ptx))
				c.Encrypt(got, ptx, &tweak)
				if !bytes.Equal(got, ctx) {
					t.Errorf("%s: encrypt\n got %x\nwant %x", v.name, got, ctx)
				}
				c.Decrypt(got, got, &tweak)
				if !bytes.Equal(got, ptx) {
					t.Errorf("%s: decrypt in place\n got %x\nwant %x", v.name, got, ptx)
				}
			}
		})
	}
}

// TestSbox checks the S-box table against its definition: the inverse in
// GF(2^8) followed by the affine map.
func TestSbox(t *testing.T) {
	for x := range 256 {
		inv := byte(0)
		for y := 1; y < 256; y++ {
			if gmul(byte(x), byte(y)) == 1 {
				inv = byte(y)
			}
		}
		s := inv
		for i := 1; i <= 4; i++ {
			s ^= inv<<i | inv>>(8-i)
		}
		s ^= 0x63
		if sbox[x] != s {
			t.Errorf("sbox[%#02x] = %#02x, want %#02x", x, sbox[x], s)
		}
	}
}
