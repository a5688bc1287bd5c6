package main

import (
	"encoding/json"
	"testing"
)

// keyslotArea is keyslot slot's area encryption as cryptsetup's JSON dump
// shows it.
func (w *workspace) keyslotArea(img, slot string) (cipher string, keySize int) {
	w.t.Helper()
	var m struct {
		Keyslots map[string]struct {
			Area struct {
				Encryption string `json:"encryption"`
				KeySize    int    `json:"key_size"`
			} `json:"area"`
		} `json:"keyslots"`
	}
	if err := json.Unmarshal([]byte(w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout), &m); err != nil {
		w.t.Fatal(err)
	}
	a := m.Keyslots[slot].Area
	return a.Encryption, a.KeySize
}

// TestKeyslotCipherLikeCryptsetup: --keyslot-cipher and --keyslot-key-size
// on luksFormat, luksAddKey, luksChangeKey and luksConvertKey encrypt the
// new keyslot's area with that cipher, as cryptsetup writes it (its dump
// shows the cipher and key size) and cryptsetup opens it; luksd opens
// such a keyslot cryptsetup made.
func TestKeyslotCipherLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, key2 := w.key("key", "pw"), w.key("key2", "pw2")
	pb := cheapPBKDF("pbkdf2")
	ks := func(cipher, bits string) []string {
		return []string{"--keyslot-cipher", cipher, "--keyslot-key-size", bits}
	}
	check := func(what, img, slot, keyFile, cipher string, keySize int) {
		t.Helper()
		if c, n := w.keyslotArea(img, slot); c != cipher || n != keySize {
			t.Errorf("%s: keyslot %s area %s, %d bytes; want %s, %d", what, slot, c, n, cipher, keySize)
		}
		if !w.opens(img, keyFile) {
			t.Errorf("%s: cryptsetup does not open keyslot %s", what, slot)
		}
	}

	img := w.image("fmt.img")
	w.luksd(nil, append(append([]string{"luksFormat", "-q", img, key}, pb...), ks("aes-cbc-essiv:sha256", "256")...)...).ok(t)
	check("luksFormat", img, "0", key, "aes-cbc-essiv:sha256", 32)
	w.luksd(nil, append(append([]string{"luksAddKey", "-q", "-d", key, img, key2}, pb...), ks("aes-cbc-plain64", "128")...)...).ok(t)
	check("luksAddKey", img, "1", key2, "aes-cbc-plain64", 16)
	w.luksd(nil, append(append([]string{"luksConvertKey", "-q", "-S", "1", "-d", key2, img}, pb...), ks("aes-xts-plain64", "256")...)...).ok(t)
	check("luksConvertKey", img, "1", key2, "aes-xts-plain64", 32)
	w.luksd(nil, append(append([]string{"luksChangeKey", "-q", "-S", "0", "-d", key, img, w.key("key3", "pw3")}, pb...), ks("aes-cbc-essiv:sha256", "128")...)...).ok(t)
	if c, n := w.keyslotArea(img, "0"); c != "aes-cbc-essiv:sha256" || n != 16 {
		t.Errorf("luksChangeKey: keyslot 0 area %s, %d bytes", c, n)
	}
	if !w.opens(img, w.path("key3")) {
		t.Errorf("luksChangeKey: cryptsetup does not open the new passphrase")
	}

	// cryptsetup's keyslot, luksd's unlock: the same volume key.
	cs := w.image("cs.img")
	w.cs(nil, append(append([]string{"luksFormat", "-q", cs, key}, pb...), ks("aes-cbc-plain64", "256")...)...).ok(t)
	w.sameVolumeKey(cs, key, 512)
}
