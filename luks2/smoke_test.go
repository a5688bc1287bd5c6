package luks2

import (
	"bytes"
	"testing"
)

func TestSmoke(t *testing.T) {
	img := image(t, 40<<20)
	f, size := openRW(t, img)
	pass := []byte("secret")
	h, vk, err := Format(f, size, FormatOptions{PBKDF: cheapArgon2id}, pass)
	if err != nil {
		t.Fatal(err)
	}
	_ = h
	kf := keyFile(t, pass)
	t.Log(cryptsetup(t, "luksDump", img))
	cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img)
	got := cryptsetupVolumeKey(t, img, kf)
	if !bytes.Equal(got, vk) {
		t.Fatal("vk mismatch")
	}
	h2, _ := readHdr(t, img)
	sameLines(t, "dump", dumpText(t, h2, DumpOptions{}), cryptsetup(t, "luksDump", img))
}
