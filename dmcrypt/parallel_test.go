package dmcrypt

import (
	"bytes"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
)

// barrierGuard is how long the barrier waits for all the pieces of a
// request before it lets them through and the test fails.
const barrierGuard = 20 * time.Second

// TestStalledBackendGetsAllPiecesAtOnce: a request larger than a span is
// several backend calls (here eight spans of 64 KiB; 32 MiB NBD requests
// are eight 4 MiB spans); on two cores they used to run two at a time, so
// a backend that answers each call after a delay cost four delays. All
// eight must be in flight together.
func TestStalledBackendGetsAllPiecesAtOnce(t *testing.T) {
	const size = 512 << 10
	for _, op := range []string{"read", "write"} {
		t.Run(op, func(t *testing.T) {
			d, m, _ := newTestDevice(t, 4<<20, DeviceOptions{SectorSize: 4096})
			want := bytes.Repeat([]byte("stall"), size/5+1)[:size]
			if _, err := d.WriteAt(want, 0); err != nil {
				t.Fatal(err)
			}
			d.span = size / 8
			b := devtest.NewBarrier(m, 8, barrierGuard)
			d.backend = b
			d.procs = 2
			got := make([]byte, size)
			var err error
			if op == "read" {
				_, err = d.ReadAt(got, 0)
			} else {
				_, err = d.WriteAt(want, 0)
				d.backend = m
				if err == nil {
					_, err = d.ReadAt(got, 0)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if !b.Reached() {
				t.Fatalf("the 8 spans of a %d KiB %s were never in flight together", size>>10, op)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("data differs")
			}
			if n := d.helpers.Load(); n != 0 {
				t.Fatalf("%d helper goroutines still counted", n)
			}
		})
	}
}
