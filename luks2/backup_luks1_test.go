package luks2

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestoreLUKS1FromCryptsetup: cryptsetup's LUKS1 backup ends at the
// last keyslot, before the payload offset; luksd restores it onto a wiped
// header and cryptsetup opens the volume again. A truncated backup is
// refused.
func TestRestoreLUKS1FromCryptsetup(t *testing.T) {
	pass := []byte("restore luks1")
	kf := keyFile(t, pass)
	img := formatWithCryptsetup(t, pass, "--type", "luks1")
	bak := filepath.Join(t.TempDir(), "cs.bak")
	cryptsetup(t, "luksHeaderBackup", img, "--header-backup-file", bak)
	wipeStart(t, img, 4096)
	if _, err := runCryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img); err == nil {
		t.Fatal("wiped LUKS1 header still opens")
	}
	b, err := os.Open(bak)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, _ := b.Stat()
	f, size := openRW(t, img)
	if err := Restore(f, size, b, st.Size()-4096); err == nil {
		t.Fatal("restored a truncated LUKS1 backup")
	}
	if err := Restore(f, size, b, st.Size()); err != nil {
		t.Fatalf("restoring cryptsetup's LUKS1 backup: %v", err)
	}
	cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img)
}
