package luks2

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestRestoreLUKS1FromCryptsetup: cryptsetup's LUKS1 backup ends at the
// last keyslot, before the payload offset; luksd restores it onto a wiped
// header and cryptsetup opens the volume again. A truncated backup is
// refused.
func TestRestoreLUKS1FromCryptsetup(t *testing.T) {
	pass := []byte("restore luks1")
	kf := testtool.KeyFile(t, pass)
	img := formatWithCryptsetup(t, pass, "--type", "luks1")
	bak := filepath.Join(t.TempDir(), "cs.bak")
	cryptsetup(t, "luksHeaderBackup", img, "--header-backup-file", bak)
	wipeStart(t, img, 4096)
	if _, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", kf, img); err == nil {
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

// TestRestoreLUKS1OntoLUKS2: as cryptsetup 2.6.1, a LUKS1 backup replaces
// a LUKS2 header (CheckRestore reports the other version, not a header to
// replace), writing up to the end of the last keyslot's key material and
// not the rest of the backup; a LUKS1 device with another key size keeps
// its header.
func TestRestoreLUKS1OntoLUKS2(t *testing.T) {
	pass := []byte("restore across versions")
	kf := testtool.KeyFile(t, pass)
	v1 := formatWithCryptsetup(t, pass, "--type", "luks1")
	v2 := formatWithCryptsetup(t, pass)
	f1, size1 := openRW(t, v1)
	var bak bytes.Buffer
	if err := Backup(f1, size1, &bak); err != nil {
		t.Fatal(err)
	}
	f2, size2 := openRW(t, v2)
	rc, err := CheckRestore(f2, size2, bytes.NewReader(bak.Bytes()), int64(bak.Len()))
	if err != nil || rc != (RestoreCheck{Version: 1, OtherVersion: 2}) {
		t.Fatalf("CheckRestore: %+v, %v", rc, err)
	}
	before, _ := os.ReadFile(v2)
	if err := Restore(f2, size2, bytes.NewReader(bak.Bytes()), int64(bak.Len())); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(v2)
	const keyEnd = (8 + 7*504 + 500) * 512 // 512-bit key: last key material ends at sector 4036
	if !bytes.Equal(after[:keyEnd], bak.Bytes()[:keyEnd]) || !bytes.Equal(after[keyEnd:], before[keyEnd:]) {
		t.Fatal("the restore did not write exactly the LUKS1 header and key material")
	}
	cryptsetup(t, "open", "--test-passphrase", "--type", "luks1", "--key-file", kf, v2)

	other := formatWithCryptsetup(t, pass, "--type", "luks1", "--key-size", "256")
	fo, sizeo := openRW(t, other)
	if _, err := CheckRestore(fo, sizeo, bytes.NewReader(bak.Bytes()), int64(bak.Len())); !errors.Is(err, ErrRestoreDataOffset) {
		t.Fatalf("LUKS1 backup onto a LUKS1 device with another key size: %v", err)
	}
	if err := Restore(fo, sizeo, bytes.NewReader(bak.Bytes()), int64(bak.Len())); !errors.Is(err, ErrRestoreDataOffset) {
		t.Fatalf("Restore: %v", err)
	}
}
