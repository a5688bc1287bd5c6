package testtool

import (
	"bytes"
	"os"
	"testing"
)

func TestVolumeKey(t *testing.T) {
	dump := "LUKS header information for img\nCipher name:   \taes\nMK bits:       \t256\n" +
		"MK dump:\t00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff \n\t00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee 0f \n"
	want := []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
		0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x0f}
	if got := VolumeKey(t, dump); !bytes.Equal(got, want) {
		t.Fatalf("VolumeKey = %x, want %x", got, want)
	}
}

func TestImageAndKeyFile(t *testing.T) {
	img := Image(t, 1<<20)
	if st, err := os.Stat(img); err != nil || st.Size() != 1<<20 {
		t.Fatalf("image: %v", err)
	}
	key := KeyFile(t, []byte("secret\n"))
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st.Mode())
	}
	if b, _ := os.ReadFile(key); string(b) != "secret\n" {
		t.Fatalf("key file holds %q", b)
	}
}
