package dmcrypt

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
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

// TestPieceThatPanicsReachesTheCaller: a panic in a piece of a request,
// on any goroutine, must come back to the request's own goroutine (where
// the NBD and ublk frontends turn it into EIO for that request) after
// every other piece has stopped. On a helper goroutine it used to end the
// process.
func TestPieceThatPanicsReachesTheCaller(t *testing.T) {
	d, _, _ := newTestDevice(t, 1<<20, DeviceOptions{SectorSize: 4096})
	d.procs = 4
	for _, stall := range []bool{false, true} {
		var running, started atomic.Int32
		got := func() (v any) {
			defer func() { v = recover() }()
			d.each(16, stall, func(i int) error {
				running.Add(1)
				defer running.Add(-1)
				started.Add(1)
				time.Sleep(time.Millisecond)
				panic("piece " + strconv.Itoa(i))
			})
			return nil
		}()
		p, ok := got.(*HelperPanic)
		if !ok {
			t.Fatalf("stall %v: each panicked with %#v, want a *HelperPanic", stall, got)
		}
		if s, _ := p.Value.(string); !strings.HasPrefix(s, "piece ") {
			t.Fatalf("stall %v: the panic's value is %#v", stall, p.Value)
		}
		if n := running.Load(); n != 0 {
			t.Fatalf("stall %v: %d pieces still running after each panicked", stall, n)
		}
		if n := started.Load(); n > int32(d.procs+1) { // each starts at most procs+1 goroutines
			t.Errorf("stall %v: %d pieces started after the first panic (at most one per goroutine)", stall, n)
		}
	}
}
