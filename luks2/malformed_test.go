package luks2

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// writeRawJSON stores js as the metadata of both copies with valid
// checksums, bypassing validation, so readers see exactly js.
func writeRawJSON(t *testing.T, dev Device, js []byte) {
	t.Helper()
	bh, _, err := readCopy(dev, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	area := make([]byte, bh.hdrSize-binHeaderSize)
	if len(js) > len(area) {
		t.Fatalf("test JSON of %d bytes does not fit", len(js))
	}
	copy(area, js)
	for i, off := range []int64{0, bh.hdrSize} {
		c := *bh
		c.hdrOffset = off
		raw, err := c.encode(i == 1, area)
		if err != nil {
			t.Fatal(err)
		}
		dev.WriteAt(raw, off)
		dev.WriteAt(area, off+binHeaderSize)
	}
}

var (
	freshOnce sync.Once
	freshDev  *devtest.Mem
	freshRoot *node
)

// freshImage returns a copy of a small in-memory volume with two keyslots
// (formatted once per test binary) and its metadata tree.
func freshImage(t *testing.T) (*devtest.Mem, *node) {
	t.Helper()
	freshOnce.Do(func() {
		d := devtest.NewGrowing()
		h, vk, err := Format(d, 20<<20, FormatOptions{PBKDF: cheapPBKDF2}, []byte("malformed"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.AddKey(d, vk, []byte("second"), -1, cheapPBKDF2); err != nil {
			t.Fatal(err)
		}
		freshDev, freshRoot = d, h.impl.(*header).meta.root
	})
	if freshDev == nil {
		t.Fatal("formatting the shared test volume failed")
	}
	return devtest.MemOf(freshDev.Bytes()), freshRoot.clone()
}

func mustOneLine(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
}

func TestMalformedMetadataRefused(t *testing.T) {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	cases := []struct {
		name string
		edit func(root *node) []byte
	}{
		{"broken JSON", func(*node) []byte { return []byte(`{"keyslots":{`) }},
		{"not an object", func(*node) []byte { return []byte(`[1,2]`) }},
		{"deep nesting", func(*node) []byte { return []byte(`{"tokens":` + deep + `}`) }},
		{"missing digests", func(r *node) []byte { r.del("digests"); return r.compact() }},
		{"offset as number", func(r *node) []byte {
			r.get("segments").get("0").set("offset", jInt(16777216))
			return r.compact()
		}},
		{"negative size", func(r *node) []byte {
			r.get("keyslots").get("0").get("area").set("size", jString("-4096"))
			return r.compact()
		}},
		{"overflowing keyslots_size", func(r *node) []byte {
			r.get("config").set("keyslots_size", jString("99999999999999999999999"))
			return r.compact()
		}},
		{"json_size mismatch", func(r *node) []byte {
			r.get("config").set("json_size", jString("4096"))
			return r.compact()
		}},
		{"keyslots_size unaligned", func(r *node) []byte {
			r.get("config").set("keyslots_size", jString("16744447"))
			return r.compact()
		}},
		{"overlapping keyslot areas", func(r *node) []byte {
			r.get("keyslots").get("1").get("area").set("offset", jString("36864"))
			return r.compact()
		}},
		{"area outside keyslots area", func(r *node) []byte {
			r.get("keyslots").get("1").get("area").set("offset", jString("16777216"))
			return r.compact()
		}},
		{"huge area", func(r *node) []byte {
			r.get("keyslots").get("1").get("area").set("size", jString("18446744073709551615"))
			return r.compact()
		}},
		{"segment inside keyslots area", func(r *node) []byte {
			r.get("segments").get("0").set("offset", jString("1048576"))
			return r.compact()
		}},
		{"segment unaligned", func(r *node) []byte {
			r.get("segments").get("0").set("offset", jString("16777217"))
			return r.compact()
		}},
		{"digest names missing keyslot", func(r *node) []byte {
			r.get("digests").get("0").set("keyslots", idsNode([]int{0, 1, 7}))
			return r.compact()
		}},
		{"digest names missing segment", func(r *node) []byte {
			r.get("digests").get("0").set("segments", idsNode([]int{3}))
			return r.compact()
		}},
		{"keyslot id not a number", func(r *node) []byte {
			ks := r.get("keyslots")
			ks.keys[1] = "x1"
			return r.compact()
		}},
		{"keyslot id with leading zero", func(r *node) []byte {
			ks := r.get("keyslots")
			ks.keys[1] = "01"
			return r.compact()
		}},
		{"keyslot id too large", func(r *node) []byte {
			ks := r.get("keyslots")
			ks.keys[1] = "32"
			return r.compact()
		}},
		{"token without type", func(r *node) []byte {
			r.get("tokens").set("0", obj("keyslots", idsNode([]int{0})))
			return r.compact()
		}},
		{"sector size zero", func(r *node) []byte {
			r.get("segments").get("0").set("sector_size", jInt(0))
			return r.compact()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, root := freshImage(t)
			writeRawJSON(t, f, tc.edit(root))
			_, err := Read(f, f.Size())
			mustOneLine(t, err)
			t.Logf("refused: %v", err)
		})
	}
}

func TestBadBinaryHeadersRefused(t *testing.T) {
	t.Run("checksum", func(t *testing.T) {
		f, _ := freshImage(t)
		size := f.Size()
		for _, off := range []int64{4096 + 10, 16384 + 4096 + 10} {
			f.WriteAt([]byte{' '}, off) // JSON changed, checksums not
		}
		_, err := Read(f, size)
		mustOneLine(t, err)
		if !errors.Is(err, ErrNotLUKS) || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("want a checksum error, got %v", err)
		}
	})
	t.Run("hdr_size", func(t *testing.T) {
		f, _ := freshImage(t)
		size := f.Size()
		f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0x50, 0}, offHdrSize) // 20480: not allowed
		f.WriteAt(make([]byte, 4096), 16384)
		_, err := Read(f, size)
		mustOneLine(t, err)
	})
	t.Run("not LUKS", func(t *testing.T) {
		img := testtool.Image(t, 1<<20)
		f, size := openRW(t, img)
		if _, err := Read(f, size); !errors.Is(err, ErrNotLUKS) {
			t.Fatalf("blank device: %v", err)
		}
		if IsLUKS(f) {
			t.Fatal("IsLUKS on a blank device")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		f, _ := freshImage(t)
		f = devtest.MemOf(f.Bytes()[:8192])
		_, err := Read(f, 8192)
		mustOneLine(t, err)
	})
}

// TestOddKeyslotsRefusedWhenUsed: keyslots cryptsetup's validation lets
// through (it reads the header) but that cannot open are refused when
// they are tried, with ErrKeyslotOpen; the volume opens with the others.
func TestOddKeyslotsRefusedWhenUsed(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(k *node)
	}{
		{"absurd key size", func(k *node) { k.set("key_size", jInt(1<<31)) }},
		{"bad salt", func(k *node) { k.get("kdf").set("salt", jString("!!")) }},
		{"short salt", func(k *node) { k.get("kdf").set("salt", jString("c2FsdA==")) }},
		{"no iterations", func(k *node) { k.get("kdf").set("iterations", jInt(0)) }},
		{"unknown kdf", func(k *node) { k.get("kdf").set("type", jString("scrypt")) }},
		{"unknown af hash", func(k *node) { k.get("af").set("hash", jString("rot13")) }},
		{"unknown area cipher", func(k *node) { k.get("area").set("encryption", jString("rot13-xts-plain64")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, root := freshImage(t)
			tc.edit(root.get("keyslots").get("1"))
			writeRawJSON(t, f, root.compact())
			h, err := Read(f, f.Size())
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if _, _, err := h.Unlock(f, []byte("second"), 1); !errors.Is(err, ErrKeyslotOpen) {
				t.Fatalf("Unlock of the odd keyslot: %v, want ErrKeyslotOpen", err)
			}
			if _, slot, err := h.Unlock(f, []byte("malformed"), -1); err != nil || slot != 0 {
				t.Fatalf("Unlock of keyslot 0 (tried first): slot %d, %v", slot, err)
			}
			// Tried first, the odd keyslot stops the search, as cryptsetup's.
			if _, _, err := h.Unlock(f, []byte("second"), -1); !errors.Is(err, ErrKeyslotOpen) && !errors.Is(err, ErrWrongPassphrase) {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

// TestUnsupportedHeaders: headers luksd reads and unlocks (luksDump and
// --test-passphrase work, as in cryptsetup) but refuses to map or edit,
// with ErrUnsupported.
func TestUnsupportedHeaders(t *testing.T) {
	cases := []struct {
		name             string
		edit             func(root *node)
		want             string
		unlocks, addsKey bool
	}{
		{"unknown requirement", func(r *node) {
			r.get("config").set("requirements", obj("mandatory", jArray(jString("future-feature"))))
		}, "unmet LUKS2 requirements", true, false},
		{"ecb segment", func(r *node) {
			r.get("segments").get("0").set("encryption", jString("aes-ecb"))
		}, "not secure", true, false},
		{"sector size 1536", func(r *node) {
			r.get("segments").get("0").set("sector_size", jInt(1536))
		}, "sector size", true, true},
		{"sector size 8192", func(r *node) {
			r.get("segments").get("0").set("sector_size", jInt(8192))
		}, "sector size", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, root := freshImage(t)
			tc.edit(root)
			writeRawJSON(t, f, root.compact())
			h, err := Read(f, f.Size())
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if err := h.Dump(&strings.Builder{}, DumpOptions{}); err != nil {
				t.Fatal(err)
			}
			vk, _, err := h.Unlock(f, []byte("malformed"), -1)
			if (err == nil) != tc.unlocks {
				t.Fatalf("Unlock: %v", err)
			}
			if _, err := h.Segment(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Segment: %v, want ErrUnsupported mentioning %q", err, tc.want)
			}
			if _, err := h.AddKey(f, vk, []byte("x"), -1, cheapPBKDF2); (err == nil) != tc.addsKey || err != nil && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("AddKey: %v", err)
			}
		})
	}
	t.Run("cipher_null keyslot", func(t *testing.T) {
		f, root := freshImage(t)
		root.get("keyslots").get("1").get("area").set("encryption", jString("cipher_null-ecb"))
		writeRawJSON(t, f, root.compact())
		h, err := Read(f, f.Size())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.Unlock(f, []byte("second"), 1); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not secure") {
			t.Fatalf("Unlock of the cipher_null keyslot: %v", err)
		}
		if _, slot, err := h.Unlock(f, []byte("malformed"), -1); err != nil || slot != 0 {
			t.Fatalf("Unlock of keyslot 0: %d %v", slot, err)
		}
	})
}

// TestUnknownFieldsSurvive: unknown fields, tokens and key order are kept
// through luksd's edits, and cryptsetup still reads the result.
func TestUnknownFieldsSurvive(t *testing.T) {
	d, root := freshImage(t)
	img := testtool.Image(t, 0)
	if err := os.WriteFile(img, d.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, size := openRW(t, img)
	root.get("config").set("x-future", obj("a", jArray(jInt(1), jString("two"))))
	root.get("keyslots").get("1").set("x-note", jString("kept"))
	root.get("tokens").set("3", obj("type", jString("x-custom"), "keyslots", idsNode([]int{1}), "blob", jString("<&>\"q\"/")))
	root.get("tokens").set("0", obj("type", jString("luks2-keyring"), "keyslots", idsNode([]int{0}), "key_description", jString("luksd:test")))
	writeRawJSON(t, f, root.compact())
	h, err := Read(f, size)
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "tokens dump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", img))
	vk, _, err := h.Unlock(f, []byte("malformed"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.AddKey(f, vk, []byte("third"), -1, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	lbl := "edited"
	if err := h.SetLabel(f, &lbl, nil); err != nil {
		t.Fatal(err)
	}
	h2, _ := readHdr(t, img)
	js := string(h2.JSON())
	for _, want := range []string{`"x-future":{`, `"x-note":"kept"`, `"blob":"<&>\"q\"/"`, `"type":"x-custom"`} {
		if !strings.Contains(js, want) {
			t.Fatalf("%s lost in a rewrite:\n%s", want, js)
		}
	}
	if js != cryptsetup(t, "luksDump", "--dump-json-metadata", img) {
		t.Fatal("JSON() differs from cryptsetup's --dump-json-metadata")
	}
	// Killing keyslot 1 unbinds it from the token too.
	if err := h2.KillSlot(f, 1); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "after kill", dumpText(t, h2, DumpOptions{}), cryptsetup(t, "luksDump", img))
}
