package dmcrypt

import (
	"bytes"
	"testing"
)

// TestLargeIVSectors: with iv_large_sectors, 4096-byte sector n (IV offset
// included, in 512-byte units) is encrypted as the plain cipher encrypts
// it with IV sector n/8, one sector at a time.
func TestLargeIVSectors(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 64)
	c, err := New("aes-xts-plain64", key)
	if err != nil {
		t.Fatal(err)
	}
	large := LargeIVSectors(c)
	const ss = 4096
	buf := make([]byte, 3*ss)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	orig := bytes.Clone(buf)
	got := bytes.Clone(buf)
	large.Encrypt(got, 16+8, ss) // third and later 4K sectors: IVs 3, 4, 5
	for i := 0; i < 3; i++ {
		want := bytes.Clone(orig[i*ss : (i+1)*ss])
		c.Encrypt(want, uint64(3+i), ss)
		if !bytes.Equal(got[i*ss:(i+1)*ss], want) {
			t.Fatalf("sector %d: not encrypted with IV %d", i, 3+i)
		}
	}
	large.Decrypt(got, 24, ss)
	if !bytes.Equal(got, orig) {
		t.Fatal("decrypt does not undo encrypt")
	}
}
