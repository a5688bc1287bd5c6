package luks2

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// FuzzReadHeader feeds arbitrary bytes as a device to Read. Whatever it
// accepts must dump, serialize and re-parse without error; nothing panics.
// Seeds: testdata/fuzz/FuzzReadHeader (headers luksd made, then mangled).
func FuzzReadHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dev := bytes.NewReader(data)
		IsLUKS(dev)
		h, err := Read(dev, int64(len(data)))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		if err := h.Dump(io.Discard, DumpOptions{}); err != nil {
			t.Fatal(err)
		}
		h.Dump(io.Discard, DumpOptions{VolumeKey: make([]byte, 32)})
		h.Segment()
		h.ActiveKeyslots()
		h.HeaderSize()
		if h.Version() == 2 {
			if _, err := parseJSON(h.impl.(*header).meta.root.compact()); err != nil {
				t.Fatalf("accepted metadata does not re-parse: %v", err)
			}
			if _, err := parseMetadata(h.impl.(*header).meta.root.clone(), h.impl.(*header).bin.hdrSize); err != nil {
				t.Fatalf("accepted metadata does not re-validate: %v", err)
			}
		}
	})
}

// FuzzKeyslot feeds an arbitrary keyslot object, area bytes and passphrase
// to the keyslot opener (KDF cost bounded so the fuzzer stays fast).
// Seeds: testdata/fuzz/FuzzKeyslot.
func FuzzKeyslot(f *testing.F) {
	f.Fuzz(func(t *testing.T, js, area, pass []byte) {
		n, err := parseJSON(js)
		if err != nil {
			return
		}
		k := buildKeyslot(n)
		if validateLUKS2Keyslot(n) != nil || k.typ != "luks2" {
			return
		}
		p := k.kdf
		if p.iterations > 2000 || p.time > 4 || p.memory > 256 || p.cpus > 4 || k.areaSize > 1<<20 || k.areaKeySize > 128 {
			return
		}
		vk, err := openKeyslot(bytes.NewReader(area), k, pass)
		if err == nil && len(vk) != k.keySize {
			t.Fatalf("key of %d bytes from a %d-byte keyslot", len(vk), k.keySize)
		}
	})
}

// TestKeyslotRoundTripInMemory: a keyslot written by writeMaterial opens
// with openKeyslot through the JSON it produced, for each area cipher.
func TestKeyslotRoundTripInMemory(t *testing.T) {
	for _, c := range []struct {
		cipher string
		size   int
	}{{"aes-xts-plain64", 64}, {"aes-xts-plain64", 32}, {"aes-cbc-essiv:sha256", 32}, {"xchacha12,aes-adiantum-plain64", 32}} {
		dev := devtest.NewGrowing()
		vk := bytes.Repeat([]byte{0xa5}, c.size)
		kp := kdfParams{typ: "argon2i", time: 4, memory: 32, cpus: 1, salt: []byte("0123456789abcdef0123456789abcdef")}
		ks := keyslotParams{id: 0, areaOffset: 32768, areaSize: keyslotAreaSize(c.size),
			areaCipher: c.cipher, areaKeySize: c.size, afHash: "sha256", stripes: 4000, kdf: kp}
		if err := ks.writeMaterial(dev, vk, []byte("pw")); err != nil {
			t.Fatalf("%s: %v", c.cipher, err)
		}
		n := ks.node(len(vk))
		if err := validateLUKS2Keyslot(n); err != nil {
			t.Fatal(err)
		}
		k := buildKeyslot(n)
		got, err := openKeyslot(dev, k, []byte("pw"))
		if err != nil || !bytes.Equal(got, vk) {
			t.Fatalf("%s: open = %x, %v", c.cipher, got, err)
		}
		if got, _ := openKeyslot(dev, k, []byte("px")); bytes.Equal(got, vk) {
			t.Fatalf("%s: wrong passphrase gave the key", c.cipher)
		}
	}
}

// FuzzReencryptMetadata stores arbitrary JSON, with valid checksums, as the
// metadata of a small volume luksd put in reencryption (checksum, journal
// or none resilience, picked by mode), then does what a user would: dump
// it, open it as a mapping, and resume the reencryption with the right
// passphrase. Errors are expected and must be one line; nothing panics.
// Seeds: each volume's own metadata.
func FuzzReencryptMetadata(f *testing.F) {
	var images [][]byte
	for i, p := range []ReencryptParams{
		{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: "checksum", Hash: "sha256"},
		{Cipher: "aes-xts-plain64", KeySize: 32, Resilience: "journal"},
		{Cipher: "aes-xts-plain64", KeySize: 64, Resilience: "none"},
	} {
		mem, h, _ := reencInitMem(f, p)
		images = append(images, mem.Bytes())
		f.Add(byte(i), []byte(h.impl.(*header).meta.root.compact()))
	}
	size := int64(len(images[0]))
	oneLine := func(t *testing.T, what string, err error) {
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: multi-line error: %q", what, err)
		}
	}
	f.Fuzz(func(t *testing.T, mode byte, js []byte) {
		if len(js) > 12<<10 {
			return
		}
		mem := devtest.MemOf(bytes.Clone(images[int(mode)%len(images)]))
		writeRawJSON(t, mem, js)
		h, err := Read(mem, size)
		if err != nil {
			oneLine(t, "read", err)
			return
		}
		h.Dump(io.Discard, DumpOptions{})
		if !h.InReencryption() {
			return
		}
		_, err = h.ReencryptLayout(size)
		oneLine(t, "layout", err)
		m, err := h.OpenReencrypting(devtest.MemOf(bytes.Clone(mem.Bytes())), size, []byte("pw"), -1,
			func(write func() error) error { return write() })
		oneLine(t, "open", err)
		if err == nil {
			m.Wipe()
		}
		oneLine(t, "reencrypt", h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{}))
	})
}
