package luks2

import (
	"errors"
	"fmt"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// statusOf lists KeyslotStatus for slots -1 .. n.
func statusOf(h *Header, n int) []KeyslotStatus {
	var out []KeyslotStatus
	for s := -1; s <= n; s++ {
		out = append(out, h.KeyslotStatus(s))
	}
	return out
}

// TestKeyslotStatus follows a volume of each version through adds and
// kills: the last keyslot holding the volume key is ActiveLast, an unbound
// one never counts, numbers outside the header are Invalid, and
// FreeKeyslot names the slot AddKey then takes.
func TestKeyslotStatus(t *testing.T) {
	const (
		I = KeyslotInvalid
		F = KeyslotInactive
		A = KeyslotActive
		L = KeyslotActiveLast
		U = KeyslotUnbound
	)
	pass := []byte("pass")
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprint("LUKS", version), func(t *testing.T) {
			n := MaxKeyslots(version)
			if want := map[int]int{1: 8, 2: 32}[version]; n != want {
				t.Fatalf("MaxKeyslots(%d) = %d, want %d", version, n, want)
			}
			dev := devtest.NewMem(20 << 20)
			h, vk, err := Format(dev, 20<<20, FormatOptions{Version: version, Keyslot: 2, PBKDF: cheapPBKDF2}, pass)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]KeyslotStatus, n+2)
			for i := range want {
				want[i] = F
			}
			want[0], want[n+1] = I, I
			check := func(what string, changes map[int]KeyslotStatus) {
				t.Helper()
				for s, st := range changes {
					want[s+1] = st
				}
				if got := statusOf(h, n); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: statuses of -1..%d = %v, want %v", what, n, got, want)
				}
			}
			check("formatted", map[int]KeyslotStatus{2: L})
			if s, err := h.FreeKeyslot(); err != nil || s != 0 {
				t.Fatalf("FreeKeyslot = %d, %v; want 0", s, err)
			}
			if s, err := h.AddKey(dev, vk, pass, -1, cheapPBKDF2); err != nil || s != 0 {
				t.Fatalf("AddKey = %d, %v; want 0", s, err)
			}
			check("second key", map[int]KeyslotStatus{0: A, 2: A})
			if fmt.Sprint(h.BoundKeyslots()) != "[0 2]" {
				t.Fatalf("BoundKeyslots = %v", h.BoundKeyslots())
			}
			if version == 2 {
				if _, err := h.AddUnboundKey(dev, make([]byte, 32), pass, 5, cheapPBKDF2); err != nil {
					t.Fatal(err)
				}
				check("unbound key", map[int]KeyslotStatus{5: U})
			}
			if err := h.KillSlot(dev, 0); err != nil {
				t.Fatal(err)
			}
			check("killed one", map[int]KeyslotStatus{0: F, 2: L})
			if fmt.Sprint(h.BoundKeyslots()) != "[2]" || !h.KeyslotStatus(2).Bound() || h.KeyslotStatus(5).Bound() {
				t.Fatalf("BoundKeyslots = %v", h.BoundKeyslots())
			}
		})
	}
}

// TestFreeKeyslotFull: with every LUKS1 keyslot taken, FreeKeyslot says
// so as AddKey would.
func TestFreeKeyslotFull(t *testing.T) {
	dev := devtest.NewMem(4 << 20)
	pass := []byte("p")
	h, vk, err := Format(dev, 4<<20, FormatOptions{Version: 1, PBKDF: cheapPBKDF2}, pass)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < luks1NumKeys; i++ {
		if _, err := h.AddKey(dev, vk, pass, -1, cheapPBKDF2); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := h.FreeKeyslot(); !errors.Is(err, ErrNoFreeSlot) {
		t.Fatalf("FreeKeyslot on a full header = %d, %v", s, err)
	}
	if _, err := h.AddKey(dev, vk, pass, -1, cheapPBKDF2); !errors.Is(err, ErrNoFreeSlot) {
		t.Fatalf("AddKey on a full header: %v", err)
	}
	if !h.KeyslotStatus(0).InUse() || h.KeyslotStatus(0) != KeyslotActive {
		t.Fatalf("keyslot 0 of 8 is %v", h.KeyslotStatus(0))
	}
}
