package luks2

import (
	"bytes"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/dmcrypt"
)

// Every image a power cut may leave during a reencryption opens part-way
// (a crashed hotzone recovered first) and its segments read the
// plaintext; the volume then resumes to the end, still the plaintext.
func TestOpenReencryptingAtEveryPowerCut(t *testing.T) {
	for _, res := range []string{"checksum", "journal"} {
		parts := 0
		p := ReencryptParams{Cipher: "aes-xts-plain64", KeySize: 64, SectorSize: 512, Resilience: res}
		n := reencPowerCuts(t, p, func(cut string, mem *devtest.Mem, h *Header, plain []byte) {
			size := mem.Size()
			if !h.InReencryption() {
				return
			}
			if _, err := h.OpenReencrypting(mem, size, []byte("wrong"), -1, nil); err == nil {
				t.Fatalf("%s %s: a wrong passphrase opened", res, cut)
			}
			m, err := h.OpenReencrypting(mem, size, []byte("pw"), -1, nil)
			if err != nil {
				t.Fatalf("%s %s: open: %v", res, cut, err)
			}
			if len(m.Segments) == 2 {
				parts++
			}
			if got := mappedPlaintext(t, mem, m); !bytes.Equal(got, plain) {
				t.Fatalf("%s %s: the %d segments read other plaintext", res, cut, len(m.Segments))
			}
			m.Wipe()
			if h, err = Read(mem, size); err != nil {
				t.Fatal(err)
			}
			if h.InReencryption() {
				mustNil(t, h.Reencrypt(mem, size, []byte("pw"), -1, ReencryptRun{HotzoneSize: 48 << 10}))
				h, err = Read(mem, size)
				mustNil(t, err)
			}
			if got := memPlaintext(t, h, mem); !bytes.Equal(got, plain) {
				t.Fatalf("%s %s: plaintext differs after resume from the opened state", res, cut)
			}
		})
		if parts == 0 {
			t.Fatalf("%s: no power cut left the volume in two segments", res)
		}
		t.Logf("%s: %d distinct images, %d opened in two segments", res, n, parts)
	}
}

// mappedPlaintext reads the data of m's segments through the segmented
// crypt layer, as the daemon maps them.
func mappedPlaintext(t *testing.T, dev *devtest.Mem, m *ReencryptMapping) []byte {
	t.Helper()
	var segs []dmcrypt.Segment
	for _, s := range m.Segments {
		key := m.OldKey
		if s.New {
			key = m.NewKey
		}
		c, err := dmcrypt.New(s.Cipher, key)
		mustNil(t, err)
		segs = append(segs, dmcrypt.Segment{Cipher: c, Offset: s.Offset, Size: s.Size, SectorSize: s.SectorSize, IVOffset: s.IVTweak})
	}
	d, err := dmcrypt.NewSegmented(nopClose{dev}, segs, dmcrypt.DeviceOptions{ReadOnly: true})
	mustNil(t, err)
	defer d.Close()
	buf := make([]byte, d.Size())
	_, err = d.ReadAt(buf, 0)
	mustNil(t, err)
	return buf
}

// nopClose keeps the Mem open when the crypt layer closes.
type nopClose struct{ *devtest.Mem }

func (nopClose) Close() error { return nil }
