package argon2

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rfcInputs are the inputs of RFC 9106's test vectors (section 5), which
// are also the reference implementation's KATs (kats/argon2{d,i,id} of
// github.com/P-H-C/phc-winner-argon2): 32 KiB, 3 passes, 4 lanes, a 32-byte
// tag, with a secret and associated data.
var rfcInputs = struct {
	p                            params
	password, salt, secret, data []byte
}{
	p:        params{time: 3, memoryKiB: 32, threads: 4, keyLen: 32},
	password: bytes.Repeat([]byte{1}, 32),
	salt:     bytes.Repeat([]byte{2}, 16),
	secret:   bytes.Repeat([]byte{3}, 8),
	data:     bytes.Repeat([]byte{4}, 12),
}

var rfcVectors = []struct {
	mode    Mode
	h0, tag string
}{
	{Argon2d,
		"b8819791a0359660bb7709c85fa48f04d5d82c05c5f215ccdb885491717cf757082c28b951be381410b5fc2eb7274033b9fdc7ae672bcaac5d179097a4af3109",
		"512b391b6f1162975371d30919734294f868e3be3984f3c1a13a4db9fabe4acb"},
	{Argon2i,
		"c46065815276a0b3e731731c902f1fd80cf776907fbb7b6a5ca72e7b56011feeca446c86dd75b9469a5e6879dec4b72d0863fb939b982e5f397cc7d164fddaa9",
		"c814d9d1dc7f37aa13f0d77f2494bda1c8de6b016dd388d29952a4c4672b6ce8"},
	{Argon2id,
		"2889de487eb42ae500c0007ed9252f1069eadec40d5765b485de6dc2437a67b8546a2f0acc1a0882db8fcf74714b472e94df421a5da1112ffa11434370a1e997",
		"0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659"},
}

// TestInitialHash checks H0 against the pre-hashing digests the RFC and
// the KATs print.
func TestInitialHash(t *testing.T) {
	in := rfcInputs
	for _, v := range rfcVectors {
		p := in.p
		p.mode = v.mode
		h0 := initialHash(p, in.password, in.salt, in.secret, in.data)
		if got := hex.EncodeToString(h0[:64]); got != v.h0 {
			t.Errorf("%v: H0 %s, want %s", v.mode, got, v.h0)
		}
	}
}

func TestRFC9106Vectors(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		in := rfcInputs
		for _, v := range rfcVectors {
			p := in.p
			p.mode = v.mode
			got, err := deriveWith(im, p, in.password, in.salt, in.secret, in.data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, unhex(t, v.tag)) {
				t.Errorf("%v: tag %x, want %s", v.mode, got, v.tag)
			}
		}
	})
}

// referenceVectors are the version 0x13 hashes of the reference
// implementation's own tests (src/test.c of phc-winner-argon2): 32-byte
// tags, memory 2^logMemory KiB.
var referenceVectors = []struct {
	mode                 Mode
	time, logMemory      uint32
	threads              uint8
	password, salt, hash string
}{
	{Argon2i, 2, 16, 1, "password", "somesalt", "c1628832147d9720c5bd1cfd61367078729f6dfb6f8fea9ff98158e0d7816ed0"},
	{Argon2i, 2, 18, 1, "password", "somesalt", "296dbae80b807cdceaad44ae741b506f14db0959267b183b118f9b24229bc7cb"},
	{Argon2i, 2, 8, 1, "password", "somesalt", "89e9029f4637b295beb027056a7336c414fadd43f6b208645281cb214a56452f"},
	{Argon2i, 2, 8, 2, "password", "somesalt", "4ff5ce2769a1d7f4c8a491df09d41a9fbe90e5eb02155a13e4c01e20cd4eab61"},
	{Argon2i, 1, 16, 1, "password", "somesalt", "d168075c4d985e13ebeae560cf8b94c3b5d8a16c51916b6f4ac2da3ac11bbecf"},
	{Argon2i, 4, 16, 1, "password", "somesalt", "aaa953d58af3706ce3df1aefd4a64a84e31d7f54175231f1285259f88174ce5b"},
	{Argon2i, 2, 16, 1, "differentpassword", "somesalt", "14ae8da01afea8700c2358dcef7c5358d9021282bd88663a4562f59fb74d22ee"},
	{Argon2i, 2, 16, 1, "password", "diffsalt", "b0357cccfbef91f3860b0dba447b2348cbefecadaf990abfe9cc40726c521271"},
	{Argon2id, 2, 16, 1, "password", "somesalt", "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7"},
	{Argon2id, 2, 18, 1, "password", "somesalt", "78fe1ec91fb3aa5657d72e710854e4c3d9b9198c742f9616c2f085bed95b2e8c"},
	{Argon2id, 2, 8, 1, "password", "somesalt", "9dfeb910e80bad0311fee20f9c0e2b12c17987b4cac90c2ef54d5b3021c68bfe"},
	{Argon2id, 2, 8, 2, "password", "somesalt", "6d093c501fd5999645e0ea3bf620d7b8be7fd2db59c20d9fff9539da2bf57037"},
	{Argon2id, 1, 16, 1, "password", "somesalt", "f6a5adc1ba723dddef9b5ac1d464e180fcd9dffc9d1cbf76cca2fed795d9ca98"},
	{Argon2id, 4, 16, 1, "password", "somesalt", "9025d48e68ef7395cca9079da4c4ec3affb3c8911fe4f86d1a2520856f63172c"},
	{Argon2id, 2, 16, 1, "differentpassword", "somesalt", "0b84d652cf6b0c4beaef0dfe278ba6a80df6696281d7e0d2891b817d8c458fde"},
	{Argon2id, 2, 16, 1, "password", "diffsalt", "bdf32b05ccc42eb15d58fd19b1f856b113da1e9a5874fdcc544308565aa8141c"},
}

// TestReferenceVectors checks the vectors of 64 MiB and less on every
// impl; TestReferenceVectorsLarge the others.
func TestReferenceVectors(t *testing.T) {
	if testtool.Race {
		t.Skip("64 MiB derivations: run without -race (make unit does)")
	}
	checkReferenceVectors(t, 16)
}

// TestReferenceVectorsLarge checks the 256 MiB vectors on every impl and
// the 1 GiB one (the reference implementation's TEST_LARGE_RAM case) on the
// fastest: the other paths are checked at 256 MiB and against
// x/crypto/argon2. -short skips it, as contrib/crossarch.sh does under
// qemu-user, where it takes minutes. So does -race, where the generic
// path's 256 MiB alone took over a minute: it has no concurrency to check,
// and `make unit` runs it without the race detector.
func TestReferenceVectorsLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB and 1 GiB derivations; -short")
	}
	if testtool.Race {
		t.Skip("256 MiB and 1 GiB derivations: run without -race (make unit does)")
	}
	checkReferenceVectors(t, 18)
	p := params{mode: Argon2i, time: 2, memoryKiB: 1 << 20, threads: 1, keyLen: 32}
	got, err := deriveWith(defaultImpl, p, []byte("password"), []byte("somesalt"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "d1587aca0922c3b5d6a83edab31bee3c4ebaef342ed6127a55d19b2351ad1f41"; hex.EncodeToString(got) != want {
		t.Errorf("%v, 1 GiB: %x, want %s", defaultImpl, got, want)
	}
}

// checkReferenceVectors checks referenceVectors of 2^logMemory KiB on
// every impl.
func checkReferenceVectors(t *testing.T, logMemory uint32) {
	forEachImpl(t, func(t *testing.T, im impl) {
		var m Memory
		defer m.Free()
		for _, v := range referenceVectors {
			if v.logMemory > 16 != (logMemory > 16) {
				continue
			}
			p := params{mode: v.mode, time: v.time, memoryKiB: 1 << v.logMemory, threads: uint32(v.threads), keyLen: 32}
			got, err := m.derive(im, p, []byte(v.password), []byte(v.salt), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, unhex(t, v.hash)) {
				t.Errorf("%v t=%d m=2^%d p=%d %q %q: %x, want %s", v.mode, v.time, v.logMemory, v.threads, v.password, v.salt, got, v.hash)
			}
		}
	})
}
