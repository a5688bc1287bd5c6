package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"os"
	"testing"
)

type keyHolder struct {
	block cipher.Block // round keys behind an interface, inside crypto/aes
	big   *[3 * 4096]byte
	extra []uint32
	self  *keyHolder // cycles end the walk
}

// LockReachable finds the objects behind interfaces, pointers and slices
// and locks their pages.
func TestLockReachable(t *testing.T) {
	b, err := aes.NewCipher(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	h := &keyHolder{block: b, big: new([3 * 4096]byte), extra: make([]uint32, 100)}
	h.self = h
	before := vmLocked(t)
	n, err := LockReachable(h)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("SKIP (not a pass): mlock not allowed for this user: %v", err)
		}
		t.Fatal(err)
	}
	// The holder, the array, the slice and AES-256's two schedules of 60
	// words each (at least).
	if min := 3*4096 + 400 + 2*60*4; n < min {
		t.Fatalf("found %d bytes, want at least %d", n, min)
	}
	if grew := vmLocked(t) - before; grew < 12 {
		t.Fatalf("VmLck grew by %d KiB, want at least the 12 KiB array", grew)
	}
}
