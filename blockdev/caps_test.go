package blockdev_test

import (
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// TestCapsOf: a plain device is what its methods offer; a layer declares
// its own from the device below, whatever methods it has.
func TestCapsOf(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	img := testtool.Image(t, 1<<20)
	rw, err := blockdev.OpenFile(img, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	ro, err := blockdev.OpenFile(img, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, tc := range []struct {
		name string
		dev  blockdev.Device
		want blockdev.Caps
	}{
		{"memory", mem, blockdev.Caps{}},
		{"with FUA writes", devtest.NewFUA(mem), blockdev.Caps{FUA: true}},
		{"with trim and zeroes", devtest.NewFaulty(mem), blockdev.Caps{Trim: true, WriteZeroes: true}},
		// Tracked has Trim and WriteZeroes whatever is below; its FUA
		// write is always durable by itself.
		{"tracked memory", blockdev.Track(mem), blockdev.Caps{FUA: true}},
		{"file", rw, blockdev.Caps{Trim: true, WriteZeroes: true, FUA: true}},
		{"read-only file", ro, blockdev.Caps{ReadOnly: true, Trim: true, WriteZeroes: true, FUA: true}},
	} {
		if got := blockdev.CapsOf(tc.dev); got != tc.want {
			t.Errorf("%s: CapsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// OpsOf binds what the caps declare, not every method a device has: a
// Tracked layer has Trim whatever is below it.
func TestOpsOf(t *testing.T) {
	caps, ops := blockdev.OpsOf(blockdev.Track(devtest.NewMem(4096)))
	if caps.Trim || ops.Trim != nil || ops.Zero != nil || ops.FUA == nil {
		t.Fatalf("OpsOf(tracked memory) = %+v, %+v; want FUA only", caps, ops)
	}
	_, ops = blockdev.OpsOf(blockdev.Track(devtest.NewFaulty(devtest.NewMem(4096))))
	if ops.Trim == nil || ops.Zero == nil || ops.FUA == nil {
		t.Fatalf("OpsOf(tracked trimming device) = %+v; want all three", ops)
	}
}
