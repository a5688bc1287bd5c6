package luks2

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// twinLUKS2 has cryptsetup format two LUKS2 images with pass in keyslot 0:
// one for luksd to edit, one for cryptsetup to edit the same way.
func twinLUKS2(t *testing.T, pass []byte) (mine, theirs string) {
	t.Helper()
	mine, theirs = testtool.Image(t, 20<<20), testtool.Image(t, 20<<20)
	for _, img := range []string{mine, theirs} {
		cryptsetup(t, append(append([]string{"luksFormat", "-q", "--type", "luks2", "--key-file", testtool.KeyFile(t, pass)},
			cryptsetupPBKDFArgs(cheapPBKDF2)...), img)...)
	}
	return mine, theirs
}

// sameEdits checks that luksd's image and cryptsetup's have the same
// metadata but for salts, digests and UUIDs, and that luksd's JSON() is
// what cryptsetup prints.
func sameEdits(t *testing.T, what string, h *Header, mine, theirs string) {
	t.Helper()
	js := cryptsetup(t, "luksDump", "--dump-json-metadata", mine)
	if string(h.JSON()) != js {
		t.Fatalf("%s: JSON() differs from cryptsetup's --dump-json-metadata", what)
	}
	sameLines(t, what+" JSON", normalize(js), normalize(cryptsetup(t, "luksDump", "--dump-json-metadata", theirs)))
	sameLines(t, what+" luksDump", dumpText(t, h, DumpOptions{}), cryptsetup(t, "luksDump", mine))
}

// TestUnboundKeyLikeCryptsetup: AddUnboundKey lays out keyslot and digest
// as cryptsetup 2.6's luksAddKey --unbound does; open ignores the key,
// `open --test-passphrase --unbound` and `luksDump --unbound` find it;
// KillSlot drops its digest with it, as cryptsetup does.
func TestUnboundKeyLikeCryptsetup(t *testing.T) {
	pass, upass := []byte("bound"), []byte("unbound pass")
	mine, theirs := twinLUKS2(t, pass)
	pb := cryptsetupPBKDFArgs(cheapPBKDF2)
	ukf := testtool.KeyFile(t, upass)
	cryptsetup(t, append(append([]string{"luksAddKey", "-q", "--unbound", "--key-size", "256"}, pb...), theirs, ukf)...)
	cryptsetup(t, append(append([]string{"luksAddKey", "-q", "--unbound", "--key-size", "128"}, pb...), theirs, ukf)...)

	h, f := readHdr(t, mine)
	key := make([]byte, 32)
	rand.Read(key)
	if slot, err := h.AddUnboundKey(f, key, upass, -1, cheapPBKDF2); err != nil || slot != 1 {
		t.Fatalf("AddUnboundKey: slot %d, %v", slot, err)
	}
	if slot, err := h.AddUnboundKey(f, key[:16], upass, -1, cheapPBKDF2); err != nil || slot != 2 {
		t.Fatalf("AddUnboundKey 128 bits: slot %d, %v", slot, err)
	}
	sameEdits(t, "unbound", h, mine, theirs)
	if !strings.Contains(dumpText(t, h, DumpOptions{}), "  1: luks2 (unbound)") {
		t.Fatal("luksDump does not show keyslot 1 as unbound")
	}

	// The last keyslot in the metadata is unbound: cryptsetup says "No
	// usable keyslot is available." for any passphrase but the bound one.
	for _, p := range [][]byte{upass, []byte("wrong")} {
		if _, _, err := h.Unlock(f, p, -1); !errors.Is(err, ErrNoUsableKeyslot) {
			t.Fatalf("Unlock with %q: %v, want ErrNoUsableKeyslot", p, err)
		}
		if out, err := testtool.Output(t, "cryptsetup", "open", "--test-passphrase", "--key-file", testtool.KeyFile(t, p), mine); err == nil || !strings.Contains(out, "No usable keyslot is available.") {
			t.Fatalf("cryptsetup open with %q: %v %q", p, err, out)
		}
	}
	if got, slot, err := h.Unlock(f, upass, 1); err != nil || slot != 1 || !bytes.Equal(got, key) {
		t.Fatalf("named unbound keyslot: slot %d, %v", slot, err)
	}
	cryptsetup(t, "open", "--test-passphrase", "--unbound", "-S", "1", "--key-file", ukf, mine)
	out := cryptsetup(t, "luksDump", "--unbound", "-S", "1", "--key-file", ukf, mine)
	if !strings.Contains(out, "Key bits:\t256") || !strings.Contains(strings.ReplaceAll(out, " ", ""), hex.EncodeToString(key[:16])) {
		t.Fatalf("cryptsetup's luksDump --unbound does not show the key:\n%s", out)
	}
	var dump strings.Builder
	if err := h.DumpUnbound(&dump, 1, key, DumpOptions{Device: mine}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "luksDump --unbound", dump.String(), out)
	dump.Reset()
	if err := h.DumpUnbound(&dump, 2, key[:16], DumpOptions{Device: mine}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "luksDump --unbound 128 bits", dump.String(), cryptsetup(t, "luksDump", "--unbound", "-S", "2", "--key-file", ukf, mine))

	// The bound keyslot is untouched, and the bound key still opens.
	cryptsetup(t, "open", "--test-passphrase", "--key-file", testtool.KeyFile(t, pass), mine)

	// Kill the first unbound keyslot: its digest goes too.
	if err := h.KillSlot(f, 1); err != nil {
		t.Fatal(err)
	}
	cryptsetup(t, "luksKillSlot", "-q", theirs, "1")
	sameEdits(t, "unbound killed", h, mine, theirs)

	// A wrong-size key for the cipher still gets the segment's area key.
	if slot, err := h.AddUnboundKey(f, make([]byte, 48), upass, 9, cheapPBKDF2); err != nil || slot != 9 {
		t.Fatalf("AddUnboundKey slot 9: %d, %v", slot, err)
	}
	if k := h.impl.(*header).meta.keyslots[9]; k.areaKeySize != 64 || k.keySize != 48 {
		t.Fatalf("unbound keyslot: area key %d bytes, key %d bytes", k.areaKeySize, k.keySize)
	}
	cryptsetup(t, "open", "--test-passphrase", "--unbound", "-S", "9", "--key-file", ukf, mine)
	if _, err := h.AddUnboundKey(f, nil, upass, -1, cheapPBKDF2); err == nil {
		t.Fatal("AddUnboundKey without a key succeeded")
	}
}

// TestPriorityLikeCryptsetup: SetPriority writes what cryptsetup's config
// --priority writes, and Unlock tries keyslots in the order cryptsetup
// does: preferred first, ignored only when named.
func TestPriorityLikeCryptsetup(t *testing.T) {
	pass := []byte("same passphrase")
	mine, theirs := twinLUKS2(t, pass)
	kf := testtool.KeyFile(t, pass)
	pb := cryptsetupPBKDFArgs(cheapPBKDF2)
	for _, img := range []string{mine, theirs} {
		cryptsetup(t, append(append([]string{"luksAddKey", "-q", "--key-file", kf}, pb...), img, kf)...)
	}
	h, f := readHdr(t, mine)
	opened := func() (luksd, cs int) {
		_, slot, err := h.Unlock(f, pass, -1)
		if err != nil {
			slot = -1
		}
		return slot, opensSlot(t, mine, pass)
	}
	if a, b := opened(); a != 0 || b != 0 {
		t.Fatalf("before: luksd opens slot %d, cryptsetup %d; want 0", a, b)
	}
	for _, step := range []struct {
		slot     int
		prio     Priority
		name     string
		wantSlot int
	}{
		{1, PriorityPrefer, "prefer", 1},
		{1, PriorityNormal, "normal", 0},
		{0, PriorityIgnore, "ignore", 1},
		{1, PriorityIgnore, "ignore", -1},
	} {
		if err := h.SetPriority(f, step.slot, step.prio); err != nil {
			t.Fatal(err)
		}
		cryptsetup(t, "config", "--priority", step.name, "-S", string(rune('0'+step.slot)), theirs)
		sameEdits(t, "priority "+step.name, h, mine, theirs)
		if a, b := opened(); a != step.wantSlot || b != step.wantSlot {
			t.Fatalf("%s on slot %d: luksd opens slot %d, cryptsetup %d; want %d", step.name, step.slot, a, b, step.wantSlot)
		}
	}
	// An ignored keyslot still opens when named.
	if _, slot, err := h.Unlock(f, pass, 1); err != nil || slot != 1 {
		t.Fatalf("named ignored keyslot: %d, %v", slot, err)
	}
	if err := h.SetPriority(f, 7, PriorityPrefer); err == nil {
		t.Fatal("SetPriority on an empty keyslot succeeded")
	}
	if err := h.SetPriority(f, 0, Priority(3)); err == nil {
		t.Fatal("SetPriority 3 succeeded")
	}
}

// TestUnboundKeyWithoutBoundKeyslots: with no keyslot telling the volume
// key size (an erased volume), cryptsetup encrypts an unbound keyslot with
// aes-xts-plain64 and a 512-bit key, whatever the segment cipher.
func TestUnboundKeyWithoutBoundKeyslots(t *testing.T) {
	pass := []byte("erased")
	mine, theirs := testtool.Image(t, 20<<20), testtool.Image(t, 20<<20)
	for _, img := range []string{mine, theirs} {
		cryptsetup(t, append(append([]string{"luksFormat", "-q", "--type", "luks2", "--cipher", "aes-cbc-essiv:sha256", "--key-size", "256",
			"--key-file", testtool.KeyFile(t, pass)}, cryptsetupPBKDFArgs(cheapPBKDF2)...), img)...)
		cryptsetup(t, "erase", "-q", img)
	}
	upass := []byte("unbound")
	cryptsetup(t, append(append([]string{"luksAddKey", "-q", "--unbound", "--key-size", "128"}, cryptsetupPBKDFArgs(cheapPBKDF2)...), theirs, testtool.KeyFile(t, upass))...)
	h, f := readHdr(t, mine)
	key := make([]byte, 16)
	rand.Read(key)
	if _, err := h.AddUnboundKey(f, key, upass, -1, cheapPBKDF2); err != nil {
		t.Fatal(err)
	}
	sameEdits(t, "unbound on an erased volume", h, mine, theirs)
	cryptsetup(t, "open", "--test-passphrase", "--unbound", "-S", "0", "--key-file", testtool.KeyFile(t, upass), mine)
}
