package luks2

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

func formatWithCryptsetup(t *testing.T, pass []byte, extra ...string) string {
	t.Helper()
	img := testtool.Image(t, 20<<20)
	args := append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", testtool.KeyFile(t, pass)}, cryptsetupPBKDFArgs(cheapPBKDF2)...)
	cryptsetup(t, append(append(args, extra...), img)...)
	return img
}

func wipeStart(t *testing.T, img string, n int64) {
	t.Helper()
	f, _ := openRW(t, img)
	if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
		t.Fatal(err)
	}
}

// TestBackupMatchesCryptsetup: luksd's header backup is byte for byte
// cryptsetup's, for LUKS2 and LUKS1.
func TestBackupMatchesCryptsetup(t *testing.T) {
	pass := []byte("backup")
	for _, typ := range []string{"luks2", "luks1"} {
		t.Run(typ, func(t *testing.T) {
			img := formatWithCryptsetup(t, pass, "--type", typ)
			theirs := filepath.Join(t.TempDir(), "cs.bak")
			cryptsetup(t, "luksHeaderBackup", img, "--header-backup-file", theirs)
			f, size := openRW(t, img)
			var mine bytes.Buffer
			if err := Backup(f, size, &mine); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(theirs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mine.Bytes(), want) {
				t.Fatalf("backup: %d bytes, cryptsetup's %d bytes, contents differ", mine.Len(), len(want))
			}
		})
	}
}

// TestRestoreBothWays: a backup made by either tool restores a wiped
// header with the other, and the volume opens again.
func TestRestoreBothWays(t *testing.T) {
	pass := []byte("restore")
	kf := testtool.KeyFile(t, pass)

	// cryptsetup backup, luksd restore.
	img := formatWithCryptsetup(t, pass)
	bak := filepath.Join(t.TempDir(), "cs.bak")
	cryptsetup(t, "luksHeaderBackup", img, "--header-backup-file", bak)
	wipeStart(t, img, 16<<20)
	if _, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", kf, img); err == nil {
		t.Fatal("wiped header still opens")
	}
	f, size := openRW(t, img)
	b, err := os.Open(bak)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, _ := b.Stat()
	if err := Restore(f, size, b, st.Size()); err != nil {
		t.Fatal(err)
	}
	cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img)

	// luksd backup, cryptsetup restore.
	img2 := formatWithCryptsetup(t, pass)
	f2, size2 := openRW(t, img2)
	bak2 := filepath.Join(t.TempDir(), "luksd.bak")
	var buf bytes.Buffer
	if err := Backup(f2, size2, &buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bak2, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	wipeStart(t, img2, 16<<20)
	cryptsetup(t, "luksHeaderRestore", "-q", img2, "--header-backup-file", bak2)
	h, f2 := readHdr(t, img2)
	if _, _, err := h.Unlock(f2, pass, -1); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRefusesBadBackups(t *testing.T) {
	pass := []byte("restore")
	img := formatWithCryptsetup(t, pass)
	f, size := openRW(t, img)
	garbage := bytes.Repeat([]byte{0x55}, 1<<20)
	if err := Restore(f, size, bytes.NewReader(garbage), int64(len(garbage))); err == nil {
		t.Fatal("restored a backup that is not a LUKS header")
	}
	var buf bytes.Buffer
	if err := Backup(f, size, &buf); err != nil {
		t.Fatal(err)
	}
	small := testtool.Image(t, 8<<20)
	fs, ssize := openRW(t, small)
	if err := Restore(fs, ssize, bytes.NewReader(buf.Bytes()), int64(buf.Len())); err == nil {
		t.Fatal("restored a 16 MiB header area onto an 8 MiB device")
	}
	// A backup of another volume with a different data offset is refused.
	other := formatWithCryptsetup(t, pass, "--offset", "65536")
	fo, osize := openRW(t, other)
	var ob bytes.Buffer
	if err := Backup(fo, osize, &ob); err != nil {
		t.Fatal(err)
	}
	if err := Restore(f, size, bytes.NewReader(ob.Bytes()), int64(ob.Len())); err == nil {
		t.Fatal("restored a backup whose data offset differs from the device's header")
	}
}

// TestSecondaryHeader: a wiped primary header still opens through the
// secondary (found by scanning the standard offsets), and the next edit
// repairs the primary.
func TestSecondaryHeader(t *testing.T) {
	pass := []byte("secondary")
	for _, mda := range []int64{16 << 10, 256 << 10} {
		img := testtool.Image(t, 20<<20)
		f, size := openRW(t, img)
		if _, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2, MetadataSize: mda}, pass); err != nil {
			t.Fatal(err)
		}
		wipeStart(t, img, 4096)
		h, f := readHdr(t, img)
		if h.HeaderSize() != 2*mda+int64(16<<20-2*mda) {
			t.Fatalf("HeaderSize() = %d", h.HeaderSize())
		}
		if _, _, err := h.Unlock(f, pass, -1); err != nil {
			t.Fatalf("metadata %d: unlock through the secondary header: %v", mda, err)
		}
		label := "repaired"
		if err := h.SetLabel(f, &label, nil); err != nil {
			t.Fatal(err)
		}
		bh, _, err := readCopy(f, 0, false)
		if err != nil {
			t.Fatalf("primary not repaired: %v", err)
		}
		bh2, _, err := readCopy(f, mda, true)
		if err != nil || bh.seqID != bh2.seqID || bh.label != label {
			t.Fatalf("copies differ after repair: %+v %+v %v", bh, bh2, err)
		}
		cryptsetup(t, "open", "--test-passphrase", "--key-file", testtool.KeyFile(t, pass), img)
	}
}

// TestNewerCopyWins: when the copies disagree, the one with the higher
// seqid is used.
func TestNewerCopyWins(t *testing.T) {
	pass := []byte("newer")
	img := testtool.Image(t, 20<<20)
	f, size := openRW(t, img)
	h, _, err := Format(f, size, FormatOptions{PBKDF: cheapPBKDF2}, pass)
	if err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 16<<10)
	if _, err := f.ReadAt(old, 0); err != nil {
		t.Fatal(err)
	}
	label := "newer"
	if err := h.SetLabel(f, &label, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old, 0); err != nil { // primary back to the older epoch
		t.Fatal(err)
	}
	h2, _ := readHdr(t, img)
	if h2.Label() != "newer" {
		t.Fatalf("older primary won: label %q", h2.Label())
	}
	if !bytes.Contains([]byte(dumpText(t, h2, DumpOptions{})), []byte("Epoch:         \t4\n")) {
		t.Fatalf("epoch of the newer copy not used:\n%s", dumpText(t, h2, DumpOptions{}))
	}
}
